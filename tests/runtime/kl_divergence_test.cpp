// runtime/kl_divergence: a model against itself is exactly 0 / 1, a quantized copy (synth's seeded
// weights in Q4_0 vs F32) costs something measurable and its reference PPL equals perplexity's,
// routing is captured per layer through the expert store's observer, bad input is refused.
#include "runtime/kl_divergence.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "model/model.h"
#include "model/synth.h"
#include "runtime/perplexity.h"

namespace {

namespace fs = std::filesystem;

const char* kText =
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
    "want of a wife. However little known the feelings or views of such a man may be on his first entering a "
    "neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is "
    "considered the rightful property of some one or other of their daughters.";

class Kld : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("strata_kld_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    for (const char* type : {"f32", "q4_0"}) {
      strata::SynthSpec s;
      s.n_layer = 2;
      s.n_embd = 64;
      s.n_expert = 8;
      s.n_expert_used = 2;
      s.expert_ffn = 64;
      s.n_vocab = 300;
      s.type = type;
      s.seed = 5;
      ASSERT_TRUE(strata::synth_write(s, path(type)).ok());
    }
    strata::SynthSpec v;
    v.n_expert = 4;
    v.n_expert_used = 2;
    v.expert_ffn = 32;
    v.n_vocab = 400;
    ASSERT_TRUE(strata::synth_write(v, path("vocab400")).ok());
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return (dir_ / (name + ".gguf")).string(); }
  static inline fs::path dir_;
};

TEST_F(Kld, SelfIsExactlyZeroAndRoutingAgrees) {
  strata::KldOptions o;
  o.n_ctx = 16;
  auto r = strata::kl_divergence_of_files(path("f32"), path("f32"), kText, o, 1);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_GE(r->windows, 3);
  EXPECT_EQ(r->scored, int64_t{r->windows} * 15);
  EXPECT_EQ(r->kld_mean, 0.0);
  EXPECT_EQ(r->kld_max, 0.0);
  EXPECT_EQ(r->top1_agree, 1.0);
  EXPECT_EQ(r->dppl(), 0.0);
  ASSERT_EQ(r->routing.size(), 2u);  // both layers route
  for (double v : r->routing) EXPECT_EQ(v, 1.0);
  EXPECT_TRUE(strata::kld_gate(*r, 0.0, 1.0).ok());
}

TEST_F(Kld, QuantizedCopyCostsSomethingAndPplMatchesPerplexity) {
  strata::KldOptions o;
  o.n_ctx = 16;
  auto r = strata::kl_divergence_of_files(path("q4_0"), path("f32"), kText, o, 1);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_GT(r->kld_mean, 0.0);
  EXPECT_GE(r->kld_p99, r->kld_median);
  EXPECT_GE(r->kld_max, r->kld_p99);
  EXPECT_LE(r->top1_agree, 1.0);
  ASSERT_EQ(r->routing.size(), 2u);
  for (double v : r->routing) {
    EXPECT_GT(v, 0.0);
    EXPECT_LE(v, 1.0);
  }
  auto ref = strata::Model::load(path("f32"), {});
  ASSERT_TRUE(ref.ok());
  strata::PerplexityOptions po;
  po.n_ctx = 16;
  auto p = strata::perplexity_of_text(**ref, kText, po);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_NEAR(r->ppl_ref, p->ppl, 1e-9 * p->ppl);

  o.second_half = true;
  auto h = strata::kl_divergence_of_files(path("q4_0"), path("f32"), kText, o, 1);
  ASSERT_TRUE(h.ok()) << h.message();
  EXPECT_EQ(h->scored, int64_t{h->windows} * 7);  // positions 8..14 of each window

  auto g = strata::kld_gate(*r, r->kld_mean / 2, -1);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("mean KLD"), std::string::npos) << g.message();
  g = strata::kld_gate(*r, -1, 1.0);
  if (r->routing[0] < 1.0 || r->routing[1] < 1.0) {
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.message().find("routing consistency"), std::string::npos) << g.message();
  }
}

TEST_F(Kld, BadInput) {
  strata::KldOptions o;
  o.n_ctx = 16;
  auto v = strata::kl_divergence_of_files(path("vocab400"), path("f32"), kText, o, 1);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.message().find("different vocabularies (400 vs reference 300)"), std::string::npos)
      << v.message();
  auto s = strata::kl_divergence_of_files(path("q4_0"), path("f32"), "too short", o, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fewer than one window of 16"), std::string::npos) << s.message();
  o.n_ctx = 2;
  o.second_half = true;
  auto c = strata::kl_divergence_of_files(path("q4_0"), path("f32"), kText, o, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("too small"), std::string::npos) << c.message();
  auto m = strata::kl_divergence_of_files(path("missing"), path("f32"), kText, strata::KldOptions{}, 1);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("missing.gguf"), std::string::npos) << m.message();
}

}  // namespace
