#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "command.h"

namespace strata::cli {
std::vector<Command>& commands() {
  static std::vector<Command> c;
  return c;
}
}  // namespace strata::cli

static void usage() {
  auto cmds = strata::cli::commands();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::fprintf(
      stderr, "strata — MoE inference across the storage hierarchy\n\nusage: strata <command> [options]\n\n");
  for (auto& c : cmds) std::fprintf(stderr, "  %-12s %s\n", c.name.c_str(), c.help.c_str());
  std::fprintf(stderr, "\n`strata <command> --help` shows a command's options.\n");
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    usage();
    return argc < 2 ? 1 : 0;
  }
  for (auto& c : strata::cli::commands()) {
    if (c.name == argv[1]) {
      std::string prog = std::string("strata ") + argv[1];
      argv[1] = prog.data();
      return c.fn(argc - 1, argv + 1);
    }
  }
  std::fprintf(stderr, "strata: unknown command '%s'\n\n", argv[1]);
  usage();
  return 1;
}
