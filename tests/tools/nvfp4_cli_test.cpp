// NVFP4 end to end: `strata synth --type nvfp4` and `strata quantize IN OUT NVFP4` write NVFP4
// expert banks (GGML type 40) beside Q8_0 matrices, `strata inspect` names the type, the files
// load and generate, and an NVFP4 source converts to another type only with --allow-requantize.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/cli.h"

namespace {

namespace fs = std::filesystem;
using strata::testing::Proc;

class Nvfp4Cli : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  Proc strata(const std::string& args) { return strata::testing::run_strata(args, dir_); }
  std::string path(const std::string& name) { return (dir_ / name).string(); }
  fs::path dir_ = fs::temp_directory_path() / ("strata_nvfp4_cli_" + std::to_string(getpid()));
};

constexpr const char* kShape =
    "--layers 2 --embd 64 --heads 4 --kv-heads 2 --experts 4 --top-k 2 --expert-ffn 128 --vocab 300 ";

TEST_F(Nvfp4Cli, SynthInspectRun) {
  Proc s = strata(std::string("synth ") + kShape + "--type nvfp4 -o " + path("nv.gguf"));
  ASSERT_EQ(s.code, 0) << s.err;
  Proc i = strata("inspect -m " + path("nv.gguf"));
  ASSERT_EQ(i.code, 0) << i.err;
  EXPECT_NE(i.out.find("nvfp4"), std::string::npos) << i.out;
  Proc r = strata("run -m " + path("nv.gguf") + " -p hello -n 3 --temp 0");
  EXPECT_EQ(r.code, 0) << r.err;
  // A type the block does not divide is refused before anything is written.
  Proc bad = strata(
      "synth --layers 1 --embd 96 --heads 3 --kv-heads 1 --experts 4 --top-k 2 --expert-ffn 96 --vocab 300 "
      "--type nvfp4 -o " +
      path("bad.gguf"));
  strata::testing::expect_one_line_error(bad, "must be a multiple of 64");
  EXPECT_FALSE(fs::exists(path("bad.gguf")));
}

TEST_F(Nvfp4Cli, QuantizeExpertsToNvfp4) {
  Proc s = strata(std::string("synth ") + kShape + "--type f16 -o " + path("f16.gguf"));
  ASSERT_EQ(s.code, 0) << s.err;
  Proc d = strata("quantize --dry-run " + path("f16.gguf") + " NVFP4");
  ASSERT_EQ(d.code, 0) << d.err;
  for (const char* want : {"blk.0.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight"}) {
    const size_t at = d.out.find(want);
    ASSERT_NE(at, std::string::npos) << d.out;
    EXPECT_NE(d.out.substr(at, d.out.find('\n', at) - at).find("f16 -> nvfp4"), std::string::npos) << d.out;
  }
  const size_t q = d.out.find("blk.0.attn_q.weight");
  ASSERT_NE(q, std::string::npos);
  EXPECT_NE(d.out.substr(q, d.out.find('\n', q) - q).find("-> q8_0"), std::string::npos) << d.out;

  Proc c = strata("quantize " + path("f16.gguf") + " " + path("nv.gguf") + " NVFP4");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("-> NVFP4"), std::string::npos) << c.out;
  Proc i = strata("inspect -m " + path("nv.gguf"));
  ASSERT_EQ(i.code, 0) << i.err;
  EXPECT_NE(i.out.find("nvfp4"), std::string::npos) << i.out;
  Proc r = strata("run -m " + path("nv.gguf") + " -p hello -n 3 --temp 0");
  EXPECT_EQ(r.code, 0) << r.err;
  // An NVFP4 source converts to another type with --allow-requantize, and only with it.
  strata::testing::expect_one_line_error(
      strata("quantize " + path("nv.gguf") + " " + path("q8.gguf") + " Q8_0"),
      "requantizing from type nvfp4 is disabled");
  EXPECT_FALSE(fs::exists(path("q8.gguf")));
  Proc again = strata("quantize --allow-requantize " + path("nv.gguf") + " " + path("q8.gguf") + " Q8_0");
  EXPECT_EQ(again.code, 0) << again.err;
}

}  // namespace
