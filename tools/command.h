// Subcommand registry for the `strata` CLI. Each tools/cmd_*.cpp defines
//   static const strata::cli::Registrar reg{"run", "generate text from a prompt", &cmd_run};
// and main.cpp dispatches on argv[1]. A command returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace strata::cli {

using CommandFn = int (*)(int argc, char** argv);  // argv[0] is "strata <name>"

struct Command {
  std::string name;
  std::string help;
  CommandFn fn;
};

std::vector<Command>& commands();

struct Registrar {
  Registrar(const char* name, const char* help, CommandFn fn) { commands().push_back({name, help, fn}); }
};

}  // namespace strata::cli
