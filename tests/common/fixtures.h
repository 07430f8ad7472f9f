// Where the shared llama.cpp fixtures are: $STRATA_FIXTURES, else ../shared/fixtures beside the
// source tree. Tests that need them call STRATA_REQUIRE_FIXTURES(): absent fixtures skip the test
// with a plain message on a user's clone, and fail it when CI=true.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace strata::testing {

std::optional<std::string> fixtures_dir();      // .../fixtures (has models/, logits/, vocab/)
std::optional<std::string> fixtures_v41_dir();  // .../fixtures-v41
bool running_in_ci();
std::string source_dir();
std::string binary_dir();
std::string strata_binary();  // path of the built `strata` CLI

}  // namespace strata::testing

#define STRATA_REQUIRE_FIXTURES(dir_var)                                                          \
  auto dir_var##_opt = ::strata::testing::fixtures_dir();                                         \
  if (!dir_var##_opt) {                                                                           \
    if (::strata::testing::running_in_ci()) FAIL() << "fixtures not found (set STRATA_FIXTURES)"; \
    GTEST_SKIP() << "fixtures not found: set STRATA_FIXTURES or put them at ../shared/fixtures";  \
  }                                                                                               \
  const std::string dir_var = *dir_var##_opt

// The same for ../shared/fixtures-v41 (or $STRATA_FIXTURES_V41).
#define STRATA_REQUIRE_FIXTURES_V41(dir_var)                                                                 \
  auto dir_var##_opt = ::strata::testing::fixtures_v41_dir();                                                \
  if (!dir_var##_opt) {                                                                                      \
    if (::strata::testing::running_in_ci()) FAIL() << "fixtures-v41 not found (set STRATA_FIXTURES_V41)";    \
    GTEST_SKIP() << "fixtures-v41 not found: set STRATA_FIXTURES_V41 or put them at ../shared/fixtures-v41"; \
  }                                                                                                          \
  const std::string dir_var = *dir_var##_opt
