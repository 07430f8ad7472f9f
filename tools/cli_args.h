// Argument handling shared by the subcommands that load a model (run, serve, loadtest).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "kv/kv_type.h"
#include "model/arch.h"

namespace strata::cli {

// Parses argv[1..] into `app`, with llama.cpp's multi-letter short spellings mapped to their long
// names ("-np" -> "--parallel"; CLI11 takes one-letter short names only). nullopt: parsed, go on;
// else the exit code: 0 after --help, 2 after "strata <cmd>: error: ..." on stderr.
std::optional<int> parse_args(CLI::App& app, int argc, char** argv, const char* cmd);

// -c / --ctx-size: a count with an optional K suffix, at most 2^24 positions (0: the model's).
Result<int> parse_ctx(const std::string& text);

// KV element types, llama.cpp's flags: -ctk / --cache-type-k, -ctv / --cache-type-v, --kv-type
// (both; -ctk / -ctv win over it) and --kv-rotate on|off (Hadamard rotation of quantized rows).
// --kv-type-index: DeepSeek's indexer keys (default: the -ctk type).
struct KvTypeFlags {
  std::string k, v, both, index, rotate = "on";
};
void add_kv_type_flags(CLI::App& app, KvTypeFlags& f, const char* default_type);
// The types asked for (default_type where none was given); errors list the valid names.
// planned: also the planned types (`strata plan` prices them).
Result<KvTypes> kv_types(const KvTypeFlags& f, const char* default_type, bool planned = false);
// Where the model's KV spec has no "v" part (K = V: DeepSeek), a -ctv given is ignored: the note
// that says so ("" otherwise), for the tool to print.
std::string kv_types_note(const KvSpec& spec, const KvTypes& t, const char* arch);

// --profile accurate|fast (runtime/profile.h), and the fast profile's knobs set by hand (each wins
// over --profile; 0: off): --expert-min-share S, --index-topk-share S (deepseek4's indexer top-k).
struct ProfileFlags {
  std::string profile = "accurate";
  float expert_min_share = -1.0f;
  float index_topk_share = -1.0f;
};
void add_profile_flags(CLI::App& app, ProfileFlags& f);
Result<SeqKnobs> seq_knobs(const ProfileFlags& f);

}  // namespace strata::cli
