// `strata perplexity` end to end: the bundled smoke model's validation excerpt against the
// reference perplexity from train/ (tests/data/bundled_smoke__ppl.json), output formats, agreement
// with the library, and one-line errors with non-zero exits for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/cli.h"
#include "common/fixtures.h"
#include "model/model.h"
#include "runtime/perplexity.h"

namespace {

namespace fs = std::filesystem;

using strata::testing::Proc;
using strata::testing::slurp;

class PerplexityCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("strata_ppl_cli_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string data(const std::string& name) {
    return strata::testing::source_dir() + "/tests/data/" + name;
  }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }
  static std::string base() { return "perplexity -m " + data("bundled_smoke.gguf") + " -t 2"; }

  static Proc strata(const std::string& args) { return strata::testing::run_strata(args, dir_); }
  static void expect_one_line_error(const Proc& p, const std::string& needle) {
    strata::testing::expect_one_line_error(p, needle, true);
  }
  static void write(const std::string& name, const std::string& bytes) {
    std::ofstream out(dir_ / name, std::ios::binary);
    out << bytes;
  }

  static inline fs::path dir_;
};

TEST_F(PerplexityCli, BundledSmokeJsonMatchesReference) {
  Proc p = strata(base() + " -f " + data("bundled_smoke_valid.txt") + " --json");
  ASSERT_EQ(p.code, 0) << p.err;
  ASSERT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
  const auto got = nlohmann::json::parse(p.out);
  std::ifstream in(data("bundled_smoke__ppl.json"));
  const auto ref = nlohmann::json::parse(in);
  for (const char* k : {"windows", "scored_tokens", "ctx", "n_tokens", "model", "text"})
    EXPECT_EQ(got.at(k), ref.at(k)) << k;
  const double ppl = got.at("ppl").get<double>(), want = ref.at("ppl").get<double>();
  const double rel = std::abs(ppl - want) / want;
  std::printf("strata perplexity: %.6f, reference %.6f, relative difference %.2e\n", ppl, want, rel);
  EXPECT_LT(rel, 0.01);
  EXPECT_LT(rel, 1e-4);
  EXPECT_NEAR(got.at("nll").get<double>(), ref.at("nll").get<double>(), 1e-4);
  EXPECT_GT(got.at("seconds").get<double>(), 0);
  // Progress: a header and one line per window on stderr.
  EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1 + 34) << p.err;
  EXPECT_NE(p.err.find("[34/34] ppl"), std::string::npos) << p.err;
}

TEST_F(PerplexityCli, TextOutputAgreesWithLibrary) {
  // A prefix of the excerpt, cut at a line end, with a small window.
  const std::string text = slurp(data("bundled_smoke_valid.txt"));
  const std::string prefix = text.substr(0, text.find('\n', 1500) + 1);
  write("prefix.txt", prefix);
  Proc p = strata(base() + " -f " + path("prefix.txt") + " -c 40 -b 16 -q");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_TRUE(p.err.empty()) << p.err;
  ASSERT_EQ(p.out.rfind("perplexity: ", 0), 0u) << p.out;
  EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
  const double cli_ppl = std::stod(p.out.substr(12));

  auto m = strata::Model::load(data("bundled_smoke.gguf"), {.n_threads = 1});
  ASSERT_TRUE(m.ok()) << m.message();
  auto r = strata::perplexity_of_text(**m, prefix, {.n_ctx = 40});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_NEAR(cli_ppl, r->ppl, 1e-4 * r->ppl);  // printed with 4 decimals
  char want[64];
  std::snprintf(want, sizeof want, "windows of 40; %lld tokens", static_cast<long long>(r->n_tokens));
  EXPECT_NE(p.out.find(want), std::string::npos) << p.out;
  EXPECT_NE(p.out.find(std::to_string(r->scored_tokens) + " scored tokens"), std::string::npos) << p.out;
}

TEST_F(PerplexityCli, BadInputOneLineErrors) {
  const std::string f = " -f " + data("bundled_smoke_valid.txt");
  expect_one_line_error(strata(base() + " -f " + path("missing.txt")), "missing.txt");
  expect_one_line_error(strata(base() + " -f " + dir_.string()), "directory");
  write("short.txt", "Hello world");
  expect_one_line_error(strata(base() + " -f " + path("short.txt")), "fewer than one window of 128");
  write("empty.txt", "");
  expect_one_line_error(strata(base() + " -f " + path("empty.txt") + " -c 8"), "0 tokens");
  expect_one_line_error(strata(base() + f + " -c 1"), "-c 1");
  expect_one_line_error(strata(base() + f + " -c -4"), ">= 2");
  expect_one_line_error(strata(base() + f + " -c 99999999"), "too large");
  expect_one_line_error(strata(base() + f + " -b 0"), "-b");
  expect_one_line_error(strata(base()), "file");
  expect_one_line_error(strata("perplexity -f " + path("short.txt")), "model");
  expect_one_line_error(strata("perplexity -m " + path("nope.gguf") + f), "nope.gguf");
  expect_one_line_error(strata("perplexity -m " + data("bundled_smoke_valid.txt") + f), "magic");
  expect_one_line_error(strata(base() + f + " -c abc"), "abc");
}

}  // namespace
