#include "common/fixtures.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace strata::testing {

static std::optional<std::string> find_dir(const char* env, const std::string& dflt) {
  if (const char* e = std::getenv(env); e && *e && std::filesystem::is_directory(e)) return std::string(e);
  if (std::filesystem::is_directory(dflt)) return std::filesystem::canonical(dflt).string();
  return std::nullopt;
}

std::optional<std::string> fixtures_dir() {
  return find_dir("STRATA_FIXTURES", STRATA_FIXTURES_DEFAULT);
}

std::optional<std::string> fixtures_v41_dir() {
  return find_dir("STRATA_FIXTURES_V41", std::string(STRATA_FIXTURES_DEFAULT) + "-v41");
}

bool running_in_ci() {
  const char* ci = std::getenv("CI");
  return ci && (!std::strcmp(ci, "true") || !std::strcmp(ci, "1"));
}

std::string source_dir() {
  return STRATA_SOURCE_DIR;
}
std::string binary_dir() {
  return STRATA_BINARY_DIR;
}
std::string strata_binary() {
  return std::string(STRATA_BINARY_DIR) + "/tools/strata";
}

}  // namespace strata::testing
