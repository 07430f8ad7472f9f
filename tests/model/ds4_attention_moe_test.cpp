// Sink attention, grouped output projection, sqrt-softplus routing and clamped SwiGLU vs
// double-precision code written from deepseek-v4.md §2.3 and §2.4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/deepseek4/ds4_attention.h"
#include "model/deepseek4/ds4_moe.h"
#include "model/ds4_test_util.h"

namespace strata::ds4 {
namespace {

using testing::max_rel_err;
using testing::randn;

std::vector<double> ref_attend(const std::vector<float>& q, int nh, int hd,
                               const std::vector<const float*>& keys, double scale, const float* sinks) {
  std::vector<double> out(size_t(nh) * hd, 0.0);
  for (int h = 0; h < nh; ++h) {
    std::vector<double> s;
    for (auto* k : keys) {
      double dot = 0;
      for (int i = 0; i < hd; ++i) dot += double(q[h * hd + i]) * k[i];
      s.push_back(dot * scale);
    }
    double den = sinks ? std::exp(double(sinks[h])) : 0.0;
    for (double x : s) den += std::exp(x);
    for (size_t j = 0; j < keys.size(); ++j)
      for (int i = 0; i < hd; ++i) out[h * hd + i] += std::exp(s[j]) / den * keys[j][i];
  }
  return out;
}

TEST(Ds4Attention, SinkOnlyInDenominator) {
  const int nh = 8, hd = 64, nw = 20, nc = 7;
  auto q = randn(nh * hd, 51);
  auto win = randn(nw * hd, 52);
  auto comp = randn(nc * hd, 53);
  auto sinks = randn(nh, 54, 2.0f);
  std::vector<const float*> keys;  // window rows then compressed entries: one key list
  for (int j = 0; j < nw; ++j) keys.push_back(win.data() + j * hd);
  for (int j = 0; j < nc; ++j) keys.push_back(comp.data() + j * hd);
  std::vector<float> out(nh * hd), scratch(keys.size());
  const float scale = 1.0f / std::sqrt(float(hd));
  attend_with_sink(q.data(), nh, hd, keys.data(), int64_t(keys.size()), scale, sinks.data(), scratch.data(),
                   out.data());
  auto ref = ref_attend(q, nh, hd, keys, scale, sinks.data());
  EXPECT_LT(max_rel_err(out.data(), ref.data(), out.size()), 2e-6);
  // without a sink it is the plain softmax; a very negative sink approaches it
  attend_with_sink(q.data(), nh, hd, keys.data(), int64_t(keys.size()), scale, nullptr, scratch.data(),
                   out.data());
  ref = ref_attend(q, nh, hd, keys, scale, nullptr);
  EXPECT_LT(max_rel_err(out.data(), ref.data(), out.size()), 2e-6);
  // a huge sink swallows the mass (output -> 0) but never produces NaN
  std::vector<float> big(nh, 80.0f);
  attend_with_sink(q.data(), nh, hd, keys.data(), int64_t(keys.size()), scale, big.data(), scratch.data(),
                   out.data());
  for (float v : out) EXPECT_LT(std::fabs(v), 1e-20f);
}

TEST(Ds4Attention, GroupedOutputProjection) {
  const int G = 4, ol = 16, nh = 8, hd = 64;
  const int gin = nh * hd / G;
  auto o = randn(nh * hd, 61);
  auto wa = randn(size_t(G) * ol * gin, 62, 0.05f);
  std::vector<float> z(G * ol);
  grouped_out_a_f32(o.data(), wa.data(), G, ol, gin, z.data());
  std::vector<double> ref(G * ol, 0.0);
  for (int g = 0; g < G; ++g)  // group g = heads g*nh/G .. : contiguous slice of o
    for (int r = 0; r < ol; ++r)
      for (int i = 0; i < gin; ++i)
        ref[g * ol + r] += double(wa[(size_t(g) * ol + r) * gin + i]) * o[g * gin + i];
  EXPECT_LT(max_rel_err(z.data(), ref.data(), z.size()), 1e-5);
}

TEST(Ds4Moe, SqrtSoftplusScores) {
  const float x[6] = {-30.0f, -1.0f, 0.0f, 1.0f, 19.9f, 25.0f};
  float s[6];
  sqrt_softplus_scores(x, 6, s);
  for (int i = 0; i < 6; ++i) {
    const double ref = std::sqrt(std::log1p(std::exp(double(x[i]))));
    EXPECT_NEAR(s[i], ref, 1e-6 * std::max(1.0, ref)) << x[i];
  }
}

TEST(Ds4Moe, BiasSelectsButWeightsUseUnbiasedScores) {
  const int ne = 8, k = 4;
  auto logits = randn(ne, 71, 2.0f);
  std::vector<float> s(ne);
  sqrt_softplus_scores(logits.data(), ne, s.data());
  std::vector<float> bias(ne, 0.0f);
  // push expert with the lowest score into the selection via the bias
  const int lowest = int(std::min_element(s.begin(), s.end()) - s.begin());
  bias[lowest] = 100.0f;
  int32_t ids[k];
  float w[k];
  route_topk(s.data(), bias.data(), ne, k, /*norm_w=*/true, /*scale=*/1.5f, ids, w);
  EXPECT_EQ(ids[0], lowest);
  std::vector<int> order(ne);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] + bias[a] > s[b] + bias[b]; });
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += s[order[i]];
  for (int i = 0; i < k; ++i) {
    EXPECT_EQ(ids[i], order[i]);
    EXPECT_NEAR(w[i], s[order[i]] / sum * 1.5, 1e-6);
  }
  // without normalisation the weights are scale * score
  route_topk(s.data(), nullptr, ne, k, false, 2.0f, ids, w);
  for (int i = 0; i < k; ++i) EXPECT_NEAR(w[i], 2.0 * s[ids[i]], 1e-6);
}

TEST(Ds4Moe, HashRoutingWeights) {
  const float s[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  const int32_t ids[4] = {7, 0, 3, 3};  // tid2eid row (duplicates allowed in the table)
  float w[4];
  route_weights(s, ids, 4, true, 1.5f, w);
  const double sum = 0.8 + 0.1 + 0.4 + 0.4;
  EXPECT_NEAR(w[0], 0.8 / sum * 1.5, 1e-6);
  EXPECT_NEAR(w[1], 0.1 / sum * 1.5, 1e-6);
  EXPECT_NEAR(w[2], 0.4 / sum * 1.5, 1e-6);
  // tiny sums are clamped (no division blow-up)
  const float z[2] = {0.0f, 0.0f};
  const int32_t i2[2] = {0, 1};
  route_weights(z, i2, 2, true, 1.0f, w);
  EXPECT_EQ(w[0], 0.0f);
}

}  // namespace
}  // namespace strata::ds4
