#include "cli_args.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/units.h"

namespace strata::cli {

std::optional<int> parse_args(CLI::App& app, int argc, char** argv, const char* cmd) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& a : args) {  // llama.cpp's two-letter spellings
    if (a == "-np") a = "--parallel";
    if (a == "-ub") a = "--ubatch-size";
    if (a == "-to") a = "--timeout";
    if (a == "-npl") a = "--npl";
    if (a == "-npp") a = "--npp";
    if (a == "-ntg") a = "--ntg";
    if (a == "-dev") a = "--device";
  }
  std::reverse(args.begin(), args.end());  // CLI11 parses a vector from its back
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success&) {  // --list-devices printed them
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "strata %s: error: %s\n", cmd, e.what());
    return 2;
  }
  return std::nullopt;
}

Result<int> parse_ctx(const std::string& text) {
  auto c = parse_size(text);
  if (!c.ok()) return err("-c: %s", c.message().c_str());
  if (*c > (1u << 24)) return err("-c %s is too large", text.c_str());
  return static_cast<int>(*c);
}

}  // namespace strata::cli
