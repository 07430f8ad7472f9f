// `strata quantize`: converts a synth F16 model to MXFP4_MOE that strata then runs, --dry-run
// writes nothing, and bad input gives a one-line error before any output exists; `strata imatrix`
// feeds `quantize --imatrix`, --policy and --tensor-type-file refuse bad rules up front.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/cli.h"
#include "common/fixtures.h"

namespace {

namespace fs = std::filesystem;
using strata::testing::Proc;

class QuantizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_quantize_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    Proc r = strata(
        "synth --layers 2 --embd 64 --heads 4 --kv-heads 2 --experts 4 --top-k 2 --expert-ffn 64 --vocab 300 "
        "--type f16 -o " +
        path("f16.gguf"));
    ASSERT_EQ(r.code, 0) << r.err;
  }
  void TearDown() override { fs::remove_all(dir_); }
  Proc strata(const std::string& args) { return strata::testing::run_strata(args, dir_); }
  std::string path(const std::string& name) { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(QuantizeCli, ConvertsAndTheResultRuns) {
  Proc q = strata("quantize " + path("f16.gguf") + " " + path("mx.gguf") + " MXFP4_MOE");
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_NE(q.out.find("-> MXFP4_MOE"), std::string::npos) << q.out;
  Proc i = strata("inspect -m " + path("mx.gguf"));
  ASSERT_EQ(i.code, 0) << i.err;
  EXPECT_NE(i.out.find("mxfp4"), std::string::npos);
  Proc r = strata("run -m " + path("mx.gguf") + " -p hello -n 3 --temp 0");
  EXPECT_EQ(r.code, 0) << r.err;

  Proc d = strata("quantize --dry-run --tensor-type attn_q=q4_0 " + path("f16.gguf") + " Q8_0");
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(d.out.find("f16 -> q4_0"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("dry run, nothing written"), std::string::npos);
}

TEST_F(QuantizeCli, BadInputOneLineErrorNoOutput) {
  const std::string in = path("f16.gguf"), out = path("out.gguf");
  auto bad = [&](const std::string& args, const std::string& needle) {
    Proc p = strata("quantize " + args);
    strata::testing::expect_one_line_error(p, needle);
    EXPECT_FALSE(fs::exists(out)) << args;
  };
  bad(in + " " + out + " Q9_9", "unknown type 'Q9_9'");
  bad("--tensor-type 'attn(=q8_0' " + in + " " + out + " Q8_0", "bad regex");
  bad("--tensor-type attn=zz " + in + " " + out + " Q8_0", "unknown type 'zz'");
  bad("--output-tensor-type zz " + in + " " + out + " Q8_0", "--output-tensor-type: unknown type 'zz'");
  bad(in + " " + out, "expected IN OUT TYPE");
  Proc q = strata("quantize " + in + " " + path("q8.gguf") + " Q8_0");
  ASSERT_EQ(q.code, 0) << q.err;
  bad(path("q8.gguf") + " " + out + " Q4_0", "requantizing from type q8_0 is disabled");
  bad(path("missing.gguf") + " " + out + " Q4_0", "missing.gguf");
}

TEST_F(QuantizeCli, ImatrixPolicyAndTensorTypeFile) {
  const std::string in = path("f16.gguf"), out = path("out.gguf");
  std::ofstream(path("calib.txt"))
      << "It is a truth universally acknowledged, that a single man in possession of a "
         "good fortune, must be in want of a wife, however little known his views.";
  Proc im = strata("imatrix -m " + in + " -f " + path("calib.txt") + " -c 16 -q -o " + path("im.gguf"));
  ASSERT_EQ(im.code, 0) << im.err;
  EXPECT_NE(im.out.find("wrote"), std::string::npos) << im.out;
  Proc q = strata("quantize --imatrix " + path("im.gguf") + " --policy layers[-1].experts=q8_0 " + in + " " +
                  path("q4.gguf") + " Q4_0");
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_NE(q.out.find("importance matrix:"), std::string::npos) << q.out;
  Proc r = strata("run -m " + path("q4.gguf") + " -p hello -n 3 --temp 0");
  EXPECT_EQ(r.code, 0) << r.err;

  Proc shorter = strata("imatrix -m " + in + " -f " + path("calib.txt") + " -c 4096 -o " + path("im2.gguf"));
  strata::testing::expect_one_line_error(shorter, "fewer than one chunk of 4096");
  EXPECT_FALSE(fs::exists(path("im2.gguf")));
  auto bad = [&](const std::string& args, const std::string& needle) {
    Proc p = strata("quantize " + args);
    strata::testing::expect_one_line_error(p, needle);
    EXPECT_FALSE(fs::exists(out)) << args;
  };
  bad("--policy mlp=q8_0 " + in + " " + out + " Q8_0", "unknown tensor class 'mlp'");
  bad("--policy layers[5].experts=q8_0 " + in + " " + out + " Q8_0", "outside the model's 2 layers");
  std::ofstream(path("tt.txt")) << "# comment\nattn_q=q8_0\nnot a rule\n";
  bad("--tensor-type-file " + path("tt.txt") + " " + in + " " + out + " Q4_0", "tt.txt:3");
  bad("--imatrix " + in + " " + in + " " + out + " Q4_0", "not 'imatrix'");
}

TEST_F(QuantizeCli, KldAndTheGate) {
  const std::string in = path("f16.gguf"), out = path("gated.gguf");
  // A short excerpt keeps the four measurements fast.
  const std::string text = path("text.txt");
  std::ofstream(text) << strata::testing::slurp(strata::testing::source_dir() +
                                                "/tests/data/bundled_smoke_valid.txt")
                             .substr(0, 1500);
  Proc q = strata("quantize " + in + " " + path("q4.gguf") + " Q4_0");
  ASSERT_EQ(q.code, 0) << q.err;
  Proc k = strata("kld -m " + path("q4.gguf") + " --ref " + in + " -f " + text + " -c 32 -q --json");
  ASSERT_EQ(k.code, 0) << k.err;
  EXPECT_NE(k.out.find("\"kld_mean\""), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("\"routing\":["), std::string::npos) << k.out;
  strata::testing::expect_one_line_error(
      strata("kld -m " + path("q4.gguf") + " --ref " + in + " -f " + in + "x"), "cannot open");

  // A gate no quantization meets: no OUT, the number named.
  Proc g = strata("quantize --gate kld=0 -f " + text + " -c 32 " + in + " " + out + " Q4_0");
  EXPECT_NE(g.code, 0);
  EXPECT_NE(g.err.find("gate failed: mean KLD"), std::string::npos) << g.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".gating"));
  g = strata("quantize --gate routing=1 -f " + text + " -c 32 " + in + " " + out + " Q4_0");
  EXPECT_NE(g.err.find("routing consistency"), std::string::npos) << g.err;
  EXPECT_FALSE(fs::exists(out));
  // One every quantization meets: OUT written.
  g = strata("quantize --gate kld=100,routing=0 -f " + text + " -c 32 " + in + " " + out + " Q4_0");
  EXPECT_EQ(g.code, 0) << g.err;
  EXPECT_NE(g.out.find("gate passed"), std::string::npos) << g.out;
  EXPECT_TRUE(fs::exists(out));
  strata::testing::expect_one_line_error(
      strata("quantize --gate kld=1,speed=2 -f " + text + " " + in + " " + out + "2 Q4_0"),
      "unknown measure 'speed'");
  strata::testing::expect_one_line_error(strata("quantize --gate kld=1 " + in + " " + out + "2 Q4_0"),
                                         "--gate needs -f TEXT");
}

// --auto-promote with a gate between the uniform Q4_0 and Q8_0 mixes' measured KLD: Q4_0 fails,
// every unit at Q8_0 passes, so at least one promotion is needed and the search must stop at or
// before all of them; the printed policy reproduces the file byte for byte (units: each class of
// each layer, and with --promote-unit layer whole layers). A gate nothing meets:
// the number named, no OUT.
TEST_F(QuantizeCli, AutoPromoteUntilTheGatePasses) {
  const std::string in = path("f16.gguf"), out = path("auto.gguf");
  const std::string text = path("text.txt");
  std::ofstream(text) << strata::testing::slurp(strata::testing::source_dir() +
                                                "/tests/data/bundled_smoke_valid.txt")
                             .substr(0, 1500);
  auto kld_of = [&](const std::string& type) {
    Proc q = strata("quantize " + in + " " + path(type + ".gguf") + " " + type);
    EXPECT_EQ(q.code, 0) << q.err;
    Proc k = strata("kld -m " + path(type + ".gguf") + " --ref " + in + " -f " + text + " -c 32 -q --json");
    EXPECT_EQ(k.code, 0) << k.err;
    const size_t at = k.out.find("\"kld_mean\":");
    return at == std::string::npos ? -1.0 : std::strtod(k.out.c_str() + at + 11, nullptr);
  };
  const double k4 = kld_of("Q4_0"), k8 = kld_of("Q8_0");
  ASSERT_GT(k4, k8);
  ASSERT_GT(k8, 0);
  const std::string gate = std::to_string((k4 + k8) / 2);
  Proc a = strata("quantize --auto-promote --gate kld=" + gate + " -f " + text + " -c 32 " + in + " " + out +
                  " Q4_0");
  ASSERT_EQ(a.code, 0) << a.err << a.out;
  EXPECT_NE(a.out.find("requested mix:"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("sensitivity of layer 0"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("step 1: promote"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("gate passed"), std::string::npos) << a.out;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".promote"));
  Proc r = strata("run -m " + out + " -p hello -n 3 --temp 0");
  EXPECT_EQ(r.code, 0) << r.err;
  const size_t p0 = a.out.find("policy: ");
  ASSERT_NE(p0, std::string::npos) << a.out;
  const std::string policy = a.out.substr(p0 + 8, a.out.find('\n', p0) - p0 - 8);
  EXPECT_NE(policy.find("=q8_0"), std::string::npos) << policy;
  Proc again = strata("quantize --policy '" + policy + "' " + in + " " + path("again.gguf") + " Q4_0");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(strata::testing::slurp(out), strata::testing::slurp(path("again.gguf"))) << policy;
  // Whole layers as units: passes too, its steps name layers.
  Proc l = strata("quantize --auto-promote --promote-unit layer --gate kld=" + gate + " -f " + text +
                  " -c 32 " + in + " " + path("layers.gguf") + " Q4_0");
  ASSERT_EQ(l.code, 0) << l.err << l.out;
  EXPECT_NE(l.out.find("sensitivity of layer 1: "), std::string::npos) << l.out;
  EXPECT_NE(l.out.find("gate passed"), std::string::npos) << l.out;

  const std::string never = path("never.gguf");
  Proc n = strata("quantize --auto-promote --gate kld=0 -f " + text + " -c 32 " + in + " " + never + " Q4_0");
  strata::testing::expect_one_line_error(n,
                                         "even with every layer promoted to q8_0 the gate failed: mean KLD");
  EXPECT_FALSE(fs::exists(never));
  EXPECT_FALSE(fs::exists(never + ".promote"));
  strata::testing::expect_one_line_error(strata("quantize --auto-promote " + in + " " + never + " Q4_0"),
                                         "--auto-promote needs --gate");
  strata::testing::expect_one_line_error(strata("quantize --auto-promote --promote-type zz --gate kld=1 -f " +
                                                text + " " + in + " " + never + " Q4_0"),
                                         "--promote-type: unknown type 'zz'");
  strata::testing::expect_one_line_error(
      strata("quantize --auto-promote --promote-unit expert --gate kld=1 -f " + text + " " + in + " " +
             never + " Q4_0"),
      "--promote-unit 'expert': expected layer or class");
  EXPECT_FALSE(fs::exists(never));
}

}  // namespace
