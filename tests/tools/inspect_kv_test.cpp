// `strata inspect --kv`: the KV memory bill from a config.json or a GGUF, and its errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/fixtures.h"

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliRun strata_run(const std::string& args) {
  const fs::path base = fs::temp_directory_path() / ("inspect_kv_" + std::to_string(getpid()));
  const std::string o = base.string() + ".out", e = base.string() + ".err";
  const std::string cmd = strata::testing::strata_binary() + " " + args + " >" + o + " 2>" + e;
  const int st = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  r.out = slurp(o);
  r.err = slurp(e);
  fs::remove(o);
  fs::remove(e);
  return r;
}

std::string flash() {
  return strata::testing::source_dir() + "/tests/data/deepseek-v4-flash.config.json";
}

TEST(InspectKv, V4FlashConfigJson) {
  CliRun r = strata_run("inspect --kv --config " + flash() + " -c 1048576 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["n_ctx"], 1048576);
  EXPECT_EQ(j["bytes_per_token"]["bf16"].get<double>(), 6880.0);  // deepseek-v4.md §5.1
  EXPECT_EQ(j["bytes_per_token"]["q8_0"].get<double>(), 3655.0);
  EXPECT_EQ(j["total_bytes"]["bf16"].get<uint64_t>(),
            6880ull * 1048576 + j["fixed_bytes"]["bf16"].get<uint64_t>());
}

TEST(InspectKv, TextTableNamesEveryCacheKind) {
  CliRun r = strata_run("inspect --kv --config " + flash());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"CSA compressed KV", "HCA compressed KV", "CSA indexer keys", "sliding-window ring",
                        "compressor state", "6880.0", "1048576 tokens", "bf16", "q8_0", "mxfp4"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(InspectKv, FromGguf) {
  STRATA_REQUIRE_FIXTURES(dir);
  CliRun r = strata_run("inspect --kv -m " + dir + "/models/tiny-deepseek4-f32.gguf -c 320 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["arch"], "deepseek4");
  // 2 CSA layers x 64 x 2 B / 4 + 2 HCA x 64 x 2 / 128 + 2 indexer x 64 x 2 / 4
  EXPECT_EQ(j["bytes_per_token"]["bf16"].get<double>(), 64.0 + 2.0 + 64.0);
}

TEST(InspectKv, BadInputIsAOneLineError) {
  CliRun r = strata_run("inspect --kv");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-m MODEL.gguf or --config"), std::string::npos) << r.err;
  r = strata_run("inspect --kv --config /nonexistent/config.json");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/nonexistent/config.json"), std::string::npos) << r.err;
  r = strata_run("inspect --kv --config " + flash() + " -c -5");
  EXPECT_NE(r.code, 0);
}

}  // namespace
