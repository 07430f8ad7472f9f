// `strata split`: a model written as gguf-split shards (by count and by size) runs from its first
// shard, `--merge` gives back the original file byte for byte, and bad flags / shards are
// one-line errors naming the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/cli.h"
#include "common/fixtures.h"

namespace {

namespace fs = std::filesystem;
using strata::testing::Proc;

class SplitCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_split_cli_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Proc strata(const std::string& args) { return strata::testing::run_strata(args, dir_); }
  static std::string model() { return strata::testing::source_dir() + "/tests/data/bundled_smoke.gguf"; }
  fs::path dir_;
};

TEST_F(SplitCli, SplitRunMerge) {
  const std::string prefix = (dir_ / "smoke").string();
  Proc s = strata("split " + model() + " " + prefix + " --split-max-tensors 6");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("wrote 5 shards, 27 tensors"), std::string::npos) << s.out;
  const std::string first = prefix + "-00001-of-00005.gguf";
  Proc a = strata("run -m " + first + " -p Once -n 6 --temp 0 -t 1 -q");
  Proc b = strata("run -m " + model() + " -p Once -n 6 --temp 0 -t 1 -q");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  const std::string merged = (dir_ / "merged.gguf").string();
  Proc m = strata("split --merge " + first + " " + merged);
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(strata::testing::slurp(merged), strata::testing::slurp(model()));
  Proc z = strata("split " + model() + " " + (dir_ / "z").string() + " --split-max-size 256K");
  ASSERT_EQ(z.code, 0) << z.err;
  EXPECT_TRUE(fs::exists(dir_ / "z-00001-of-00007.gguf")) << z.out;

  strata::testing::expect_one_line_error(strata("run -m " + prefix + "-00002-of-00005.gguf -p x -n 1"),
                                         "open the first shard", true);
  fs::remove(prefix + "-00004-of-00005.gguf");
  strata::testing::expect_one_line_error(strata("run -m " + first + " -p x -n 1"),
                                         "smoke-00004-of-00005.gguf", true);
  strata::testing::expect_one_line_error(strata("split " + model() + " " + prefix), "--split-max-tensors",
                                         true);
  strata::testing::expect_one_line_error(strata("split " + model() + " " + prefix + " --split-max-size 0"),
                                         "--split-max-size", true);
}

}  // namespace
