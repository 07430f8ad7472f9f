// runtime/kl_divergence: a model against itself is exactly 0 / 1, a quantized copy (synth's seeded
// weights in Q4_0 vs F32) costs something measurable and its reference PPL equals perplexity's,
// routing is captured per layer through the expert store's observer, bad input is refused.
#include "runtime/kl_divergence.h"
#include "runtime/kld_base.h"

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

// llama-perplexity's --kl-divergence-base file: the f32 synth's own logits saved in its layout give
// ~0 against the f32 model (only the file's 16-bit log-probs differ) and, against the Q4_0 copy,
// the KLD that --ref measures over the same second halves; a bad or truncated file is named.
TEST_F(Kld, AgainstASavedBaseFile) {
  auto ref = strata::Model::load(path("f32"), {.n_threads = 1});
  ASSERT_TRUE(ref.ok()) << ref.message();
  const int ctx = 16, V = (*ref)->n_vocab();
  std::vector<int32_t> toks = (*ref)->tokenizer().encode(kText, false, false);
  const int n_chunk = static_cast<int>(toks.size()) / ctx;
  ASSERT_GE(n_chunk, 2);
  toks.resize(static_cast<size_t>(n_chunk) * ctx);
  std::vector<float> rows;
  {
    auto s = (*ref)->new_session({.n_ctx = ctx});
    ASSERT_TRUE(s.ok());
    std::vector<float> all(static_cast<size_t>(ctx) * V);
    const int32_t bos = (*ref)->tokenizer().add_bos() ? (*ref)->tokenizer().bos_id() : -1;
    for (int c = 0; c < n_chunk; ++c) {
      std::vector<int32_t> win(toks.begin() + c * ctx, toks.begin() + (c + 1) * ctx);
      if (bos >= 0) win[0] = bos;
      (*s)->reset();
      ASSERT_TRUE((*s)->eval(win, all.data(), true).ok());
      rows.insert(rows.end(), all.begin() + static_cast<ptrdiff_t>(ctx / 2) * V,
                  all.begin() + static_cast<ptrdiff_t>(ctx - 1) * V);
    }
  }
  const std::string file = (dir_ / "base.kld").string();
  ASSERT_TRUE(strata::write_kld_base(file, ctx, V, toks, rows).ok());
  auto base = strata::read_kld_base(file);
  ASSERT_TRUE(base.ok()) << base.message();
  EXPECT_EQ(base->n_chunk, n_chunk);
  strata::KldOptions o;
  auto self = strata::kl_divergence_vs_base(**ref, *base, o);
  ASSERT_TRUE(self.ok()) << self.message();
  EXPECT_EQ(self->scored, int64_t{n_chunk} * (ctx - 1 - ctx / 2));
  EXPECT_LT(self->kld_max, 2e-5);  // the file's 16-bit log-probs (steps of 16 / 65535)
  EXPECT_EQ(self->top1_agree, 1.0);
  EXPECT_NEAR(self->ppl_quant, self->ppl_ref, 1e-3 * self->ppl_ref);

  auto q = strata::Model::load(path("q4_0"), {.n_threads = 1});
  ASSERT_TRUE(q.ok());
  auto vs_file = strata::kl_divergence_vs_base(**q, *base, o);
  ASSERT_TRUE(vs_file.ok()) << vs_file.message();
  o.n_ctx = ctx;
  o.second_half = true;
  auto vs_ref = strata::kl_divergence(**q, **ref, toks, o, nullptr, nullptr);
  ASSERT_TRUE(vs_ref.ok()) << vs_ref.message();
  EXPECT_GT(vs_file->kld_mean, 1e-4);
  EXPECT_NEAR(vs_file->kld_mean, vs_ref->kld_mean, 0.02 * vs_ref->kld_mean + 1e-6);
  EXPECT_EQ(vs_file->top1_agree, vs_ref->top1_agree);

  // Bad files: another vocabulary, a truncated file, not a base file at all.
  auto other = strata::Model::load(path("vocab400"), {.n_threads = 1});
  ASSERT_TRUE(other.ok());
  auto e = strata::kl_divergence_vs_base(**other, *base, o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("vocabulary has 300 tokens, the model's 400"), std::string::npos) << e.message();
  fs::resize_file(file, fs::file_size(file) - 10);
  auto t = strata::read_kld_base(file);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("truncated"), std::string::npos) << t.message();
  auto g = strata::read_kld_base(path("f32"));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("no \"_logits_\" header"), std::string::npos) << g.message();
}

}  // namespace
