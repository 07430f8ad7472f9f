// The bundled trained models (train/) against the independent PyTorch reference that train/
// make_fixtures.py ran on the same GGUF file (float64 compute): logits for fixed token ids, in one
// batch and token by token. The reference sees dequantized weights and unrounded activations; strata
// rounds activations the way its kernels need (Q8_0 for MXFP4/Q8_0 weights), so quantized models get
// a looser bound than F16 ones and the argmax check skips near-ties of the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "model/model.h"
#include "runtime/perplexity.h"

namespace {

struct Bundled {
  const char* model;    // relative to the source tree
  const char* fixture;  // tests/data/<fixture>__logits.{f32,json}
  double max_abs;       // bound on max |strata - reference| over all logits
  double mean_abs;      // bound on the mean |strata - reference|
  double tie_gap;       // argmax must agree where the reference's top1-top2 gap is at least this
  double batch_incr;    // bound on max |batch - token by token|
};

std::ostream& operator<<(std::ostream& os, const Bundled& b) {
  return os << b.fixture;
}

std::vector<float> read_f32(const std::string& path, size_t n) {
  std::vector<float> v(n);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(float)));
  EXPECT_EQ(size_t(in.gcount()), n * sizeof(float)) << path;
  return v;
}

struct Diff {
  double max_abs = 0, mean_abs = 0;
  int argmax_checked = 0, argmax_same = 0;
};

Diff compare(const std::vector<float>& got, const std::vector<float>& want, const nlohmann::json& meta,
             int n_vocab, double tie_gap) {
  Diff d;
  const auto& gaps = meta.at("top1_top2_gap");
  const auto& argmax = meta.at("argmax");
  const int n = meta.at("n_tokens").get<int>();
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const float* g = got.data() + size_t(i) * n_vocab;
    const float* w = want.data() + size_t(i) * n_vocab;
    for (int v = 0; v < n_vocab; ++v) {
      const double a = std::abs(double(g[v]) - double(w[v]));
      d.max_abs = std::max(d.max_abs, a);
      sum += a;
    }
    if (gaps[i].get<double>() >= tie_gap) {
      ++d.argmax_checked;
      d.argmax_same += int(std::max_element(g, g + n_vocab) - g) == argmax[i].get<int>();
    }
  }
  d.mean_abs = sum / (double(n) * n_vocab);
  return d;
}

class BundledModel : public ::testing::TestWithParam<Bundled> {};

TEST_P(BundledModel, LogitsMatchPyTorchReference) {
  const Bundled& b = GetParam();
  const std::string src = strata::testing::source_dir();
  const std::string data = src + "/tests/data/" + b.fixture;
  std::ifstream js(data + "__logits.json");
  ASSERT_TRUE(js) << data << "__logits.json";
  const auto meta = nlohmann::json::parse(js);
  const auto tokens = meta.at("tokens").get<std::vector<int32_t>>();
  const int n_vocab = meta.at("n_vocab").get<int>();
  const auto want = read_f32(data + "__logits.f32", tokens.size() * size_t(n_vocab));

  auto m = strata::Model::load(src + "/" + b.model, {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  ASSERT_EQ((*m)->n_vocab(), n_vocab);

  // One batch.
  std::vector<float> batch(want.size());
  auto s = (*m)->new_session({});
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE((*s)->eval(tokens, batch.data(), true).ok());
  // Token by token through the same session type (the KV cache path).
  std::vector<float> incr(want.size());
  auto s2 = (*m)->new_session({});
  ASSERT_TRUE(s2.ok()) << s2.message();
  for (size_t i = 0; i < tokens.size(); ++i)
    ASSERT_TRUE((*s2)->eval({&tokens[i], 1}, incr.data() + i * n_vocab, false).ok()) << "token " << i;

  for (const auto* got : {&batch, &incr}) {
    const Diff d = compare(*got, want, meta, n_vocab, b.tie_gap);
    std::printf("%s (%s): max |d| %.3g, mean |d| %.3g, argmax %d/%d (reference gap >= %g)\n", b.fixture,
                got == &batch ? "batch" : "incremental", d.max_abs, d.mean_abs, d.argmax_same,
                d.argmax_checked, b.tie_gap);
    EXPECT_LE(d.max_abs, b.max_abs);
    EXPECT_LE(d.mean_abs, b.mean_abs);
    EXPECT_EQ(d.argmax_same, d.argmax_checked);
    EXPECT_GE(d.argmax_checked, int(tokens.size()) * 3 / 4);  // the tie exemption stays an exception
  }
  double bi = 0, bi_sum = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const double a = std::abs(batch[i] - incr[i]);
    bi = std::max(bi, a);
    bi_sum += a;
  }
  std::printf("%s: batch vs token by token: max |d| %.3g, mean |d| %.3g\n", b.fixture, bi,
              bi_sum / double(batch.size()));
  EXPECT_LE(bi, b.batch_incr) << "batch and incremental evaluation disagree";
  EXPECT_LE(bi_sum / double(batch.size()), b.mean_abs) << "batch and incremental evaluation disagree";
}

// Perplexity of the validation excerpt over the reference's windows (the model's context, tail
// dropped): the bar is 1% of the reference.
TEST_P(BundledModel, PerplexityMatchesPyTorchReference) {
  const Bundled& b = GetParam();
  const std::string src = strata::testing::source_dir();
  const std::string data = src + "/tests/data/" + b.fixture;
  std::ifstream js(data + "__ppl.json");
  ASSERT_TRUE(js) << data << "__ppl.json";
  const auto ref = nlohmann::json::parse(js);
  auto m = strata::Model::load(src + "/" + b.model, {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  auto text = strata::read_text_file(data + "_valid.txt");
  ASSERT_TRUE(text.ok()) << text.message();
  auto r = strata::perplexity_of_text(**m, *text, {});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->n_ctx, ref.at("ctx").get<int>());
  EXPECT_EQ(r->windows, ref.at("windows").get<int>());
  EXPECT_EQ(r->scored_tokens, ref.at("scored_tokens").get<int64_t>());
  const double want = ref.at("ppl").get<double>();
  const double rel = std::abs(r->ppl - want) / want;
  std::printf("%s: perplexity strata %.4f, reference %.4f (relative %.2e, %d windows of %d)\n", b.fixture,
              r->ppl, want, rel, r->windows, r->n_ctx);
  EXPECT_LT(rel, 0.01);
}

// bundled_smoke: F16 export of a 3-minute training run (train/README.md); the bar for F16 is
// max |d| <= 1e-2 with argmax everywhere except reference gaps < 1e-3. Batch and token by token
// run the same f16 arithmetic per element: they agree to 1e-4.
INSTANTIATE_TEST_SUITE_P(
    Models, BundledModel,
    ::testing::Values(Bundled{"tests/data/bundled_smoke.gguf", "bundled_smoke", 1e-2, 1e-3, 1e-3, 1e-4},
                      // The committed default model (MXFP4 experts + Q8_0 dense). Its F16 twin
                      // (build/data, not committed) measures max |d| 4.6e-3 on every row but one
                      // (train/compare_strata.py): at position 5 layer 5's second expert is a
                      // router near-tie (probabilities 0.020545 vs 0.020550) that AVX-512 and
                      // float64 break differently (0.037). Here strata's Q8_0 activation rounding
                      // gives max 0.24, mean 0.02. Token by token runs the one-token gemv kernels,
                      // batch the 4-token tiles: their f32 summation orders differ (rows 0-20 agree
                      // to 4e-6), and from position 21 one Q8_0 rounding of a K/V input lands on
                      // the other side, so later rows move by up to 0.15 (median 0.04).
                      Bundled{"models/strata-moe-31m-mxfp4.gguf", "bundled_moe", 1.0, 0.03, 1e-2, 0.5}));

}  // namespace
