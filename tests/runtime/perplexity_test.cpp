// runtime/perplexity: the window definition shared with train/ (reference perplexity of the bundled
// smoke model's validation excerpt, tests/data/bundled_smoke__ppl.json), chunking invariance, the
// NLL arithmetic, and errors for bad input.
#include "runtime/perplexity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "common/fixtures.h"
#include "model/model.h"

namespace {

namespace fs = std::filesystem;

std::string data(const std::string& name) {
  return strata::testing::source_dir() + "/tests/data/" + name;
}

class Perplexity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = strata::Model::load(data("bundled_smoke.gguf"), {});
    ASSERT_TRUE(m.ok()) << m.message();
    model_ = m.value().release();
    auto t = strata::read_text_file(data("bundled_smoke_valid.txt"));
    ASSERT_TRUE(t.ok()) << t.message();
    text_ = *t;
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  static std::vector<int32_t> tokens() { return model_->tokenizer().encode(text_, false, false); }

  static inline strata::Model* model_ = nullptr;
  static inline std::string text_;
};

TEST(PerplexityNll, MatchesLogSoftmaxInDouble) {
  const std::vector<float> uniform(10, 0.25f);
  EXPECT_NEAR(strata::token_nll(uniform.data(), 10, 3), std::log(10.0), 1e-12);
  const std::vector<float> l = {1.0f, 2.0f, 3.0f, -4.0f};
  double z = 0;
  for (float v : l) z += std::exp(double(v));
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(strata::token_nll(l.data(), 4, t), std::log(z) - l[t], 1e-12);
  // Max-subtracted: huge logits do not overflow.
  const std::vector<float> big = {1e4f, 1e4f};
  EXPECT_NEAR(strata::token_nll(big.data(), 2, 1), std::log(2.0), 1e-12);
  const std::vector<float> bad = {0.0f, NAN, 1.0f};
  EXPECT_FALSE(std::isfinite(strata::token_nll(bad.data(), 3, 0)));
}

TEST_F(Perplexity, BundledSmokeMatchesReference) {
  std::ifstream in(data("bundled_smoke__ppl.json"));
  const auto ref = nlohmann::json::parse(in);
  int calls = 0;
  double nll_sum = 0;
  auto r = strata::perplexity_of_text(*model_, text_, {}, [&](const strata::PerplexityWindow& w) {
    EXPECT_EQ(w.index, calls);
    EXPECT_EQ(w.n_windows, 34);
    nll_sum += w.nll_sum;
    ++calls;
  });
  ASSERT_TRUE(r.ok()) << r.message();
  // Default window = the model's context_length (128 for the smoke model).
  EXPECT_EQ(r->n_ctx, ref.at("ctx").get<int>());
  EXPECT_EQ(r->windows, ref.at("windows").get<int>());
  EXPECT_EQ(r->scored_tokens, ref.at("scored_tokens").get<int64_t>());
  EXPECT_EQ(r->n_tokens, ref.at("n_tokens").get<int64_t>());
  EXPECT_EQ(calls, r->windows);
  EXPECT_NEAR(nll_sum / double(r->scored_tokens), r->nll, 1e-12);
  const double want = ref.at("ppl").get<double>();
  const double rel = std::abs(r->ppl - want) / want;
  std::printf("bundled_smoke ppl: strata %.6f, reference %.6f, relative difference %.2e\n", r->ppl, want,
              rel);
  EXPECT_LT(rel, 0.01);  // the task's bar
  EXPECT_LT(rel, 1e-4);  // what strata achieves (F16 weights, f32 activations vs the float64 reference)
  EXPECT_NEAR(r->nll, ref.at("nll").get<double>(), 1e-4);
}

TEST_F(Perplexity, ChunkingAndWindowsAreIndependent) {
  const std::vector<int32_t> all = tokens();
  const std::span<const int32_t> some(all.data(), 3 * 32 + 5);  // 3 windows of 32 and a dropped tail
  auto a = strata::perplexity(*model_, some, {.n_ctx = 32, .n_batch = 512});
  auto b = strata::perplexity(*model_, some, {.n_ctx = 32, .n_batch = 7});
  ASSERT_TRUE(a.ok()) << a.message();
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(a->windows, 3);
  EXPECT_EQ(a->scored_tokens, 3 * 31);
  EXPECT_EQ(a->n_tokens, 3 * 32 + 5);
  EXPECT_NEAR(a->nll, b->nll, 1e-5);
  // Windows are scored from a reset session: window 2 alone gives window 2's progress value.
  std::vector<double> per_window;
  ASSERT_TRUE(strata::perplexity(*model_, some, {.n_ctx = 32}, [&](const strata::PerplexityWindow& w) {
                per_window.push_back(w.nll_sum);
              }).ok());
  ASSERT_EQ(per_window.size(), 3u);
  auto w2 = strata::perplexity(*model_, some.subspan(64, 32), {.n_ctx = 32});
  ASSERT_TRUE(w2.ok()) << w2.message();
  EXPECT_NEAR(w2->nll * 31, per_window[2], 1e-6);
  // The smallest window scores one token each.
  auto two = strata::perplexity(*model_, some.first(5), {.n_ctx = 2});
  ASSERT_TRUE(two.ok()) << two.message();
  EXPECT_EQ(two->windows, 2);
  EXPECT_EQ(two->scored_tokens, 2);
}

TEST_F(Perplexity, BadInputIsAnError) {
  const std::vector<int32_t> all = tokens();
  auto tiny = strata::perplexity(*model_, std::span<const int32_t>(all.data(), 10), {.n_ctx = 32});
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.message().find("10 tokens, fewer than one window of 32"), std::string::npos)
      << tiny.message();
  auto none = strata::perplexity_of_text(*model_, "", {.n_ctx = 2});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("0 tokens"), std::string::npos) << none.message();
  auto one = strata::perplexity(*model_, all, {.n_ctx = 1});
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.message().find("too small"), std::string::npos) << one.message();
  auto batch = strata::perplexity(*model_, all, {.n_ctx = 8, .n_batch = 0});
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.message().find("batch"), std::string::npos) << batch.message();
  std::vector<int32_t> oov(all.begin(), all.begin() + 8);
  oov[5] = model_->n_vocab() + 3;
  auto o = strata::perplexity(*model_, oov, {.n_ctx = 8});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.message().find(std::to_string(model_->n_vocab() + 3)), std::string::npos) << o.message();
  oov[5] = -1;
  EXPECT_FALSE(strata::perplexity(*model_, oov, {.n_ctx = 8}).ok());
}

TEST(PerplexityFile, ReadTextFile) {
  const fs::path dir = fs::temp_directory_path() / ("strata_ppl_file_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string bytes("a\0b\r\n\xff", 6);
  {
    std::ofstream out(dir / "t.txt", std::ios::binary);
    out << bytes;
  }
  auto t = strata::read_text_file((dir / "t.txt").string());
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(*t, bytes);
  auto missing = strata::read_text_file((dir / "missing.txt").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("missing.txt"), std::string::npos) << missing.message();
  auto d = strata::read_text_file(dir.string());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("directory"), std::string::npos) << d.message();
  fs::remove_all(dir);
}

}  // namespace
