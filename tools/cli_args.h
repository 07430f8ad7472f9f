// Argument handling shared by the subcommands that load a model (run, serve, loadtest).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "base/status.h"

namespace strata::cli {

// Parses argv[1..] into `app`, with llama.cpp's multi-letter short spellings mapped to their long
// names ("-np" -> "--parallel"; CLI11 takes one-letter short names only). nullopt: parsed, go on;
// else the exit code: 0 after --help, 2 after "strata <cmd>: error: ..." on stderr.
std::optional<int> parse_args(CLI::App& app, int argc, char** argv, const char* cmd);

// -c / --ctx-size: a count with an optional K suffix, at most 2^24 positions (0: the model's).
Result<int> parse_ctx(const std::string& text);

}  // namespace strata::cli
