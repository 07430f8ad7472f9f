// deepseek_v41 numeric blocks against scalar code written from the equations (v41_blocks.h,
// v41_quant.h): the ratio-2 and ratio-1 compressors, the sparse attention kernel's rounding
// (sink outside the running max, bf16 P in the value product), the bf16 Linear's accumulation
// order, and the mHC collapse / post of the single-pass hand-off.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "model/deepseek_v41/v41_blocks.h"
#include "model/deepseek_v41/v41_quant.h"

namespace strata::v41 {
namespace {

float bf(double x) {
  return bf16_to_f32(f32_to_bf16(static_cast<float>(x)));
}

std::vector<float> randv(std::mt19937& g, size_t n, float s, bool bf16_values = true) {
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (float& x : v) x = bf16_values ? bf(d(g)) : d(g);
  return v;
}

TEST(V41Compressor, Ratio2PoolsPerChannelSoftmax) {
  std::mt19937 g(1);
  const int n = 64;
  auto kv0 = randv(g, n, 1.0f, false), kv1 = randv(g, n, 1.0f, false);
  auto g0 = randv(g, n, 2.0f, false), g1 = randv(g, n, 2.0f, false);
  g0[3] = g1[3] = 0.7f;  // equal gates: the mean of the two tokens
  g0[5] = 200.0f;        // saturated gate: the first token alone
  std::vector<float> out(n);
  pool_ratio2(kv0.data(), g0.data(), kv1.data(), g1.data(), n, out.data());
  for (int d = 0; d < n; ++d) {
    const double w0 = 1.0 / (1.0 + std::exp(static_cast<double>(g1[d]) - g0[d]));
    const double want = kv0[d] * w0 + kv1[d] * (1.0 - w0);
    EXPECT_NEAR(out[d], want, std::fabs(want) * 1e-2 + 1e-6) << d;
    EXPECT_EQ(out[d], bf(out[d])) << "pooled latent is bf16";
  }
  EXPECT_EQ(out[3], bf(0.5 * kv0[3] + 0.5 * kv1[3]));
  EXPECT_EQ(out[5], bf(kv0[5]));
}

TEST(V41Compressor, Ratio1IsNormedProjection) {
  // Ratio 1: latent = bf16(w * x/rms(x)) of the bf16 projection (no gate, no pooling).
  std::mt19937 g(2);
  const int in = 96, out = 32;
  auto W = randv(g, static_cast<size_t>(in) * out, 0.1f), x = randv(g, in, 1.0f), nw = randv(g, out, 1.0f);
  std::vector<float> a(out), latent(out);
  linear_bf16(W.data(), x.data(), out, in, a.data());
  rms_norm_bf16(a.data(), nw.data(), out, 1e-20f, latent.data());
  double ss = 0;
  for (int o = 0; o < out; ++o) {
    double acc = 0;
    for (int i = 0; i < in; ++i) acc += static_cast<double>(W[o * in + i]) * x[i];
    EXPECT_NEAR(a[o], acc, std::fabs(acc) / 128 + 1e-6);
    ss += static_cast<double>(a[o]) * a[o];
  }
  const double r = 1.0 / std::sqrt(ss / out + 1e-20);
  for (int o = 0; o < out; ++o)
    EXPECT_NEAR(latent[o], nw[o] * a[o] * r, std::fabs(nw[o] * a[o] * r) / 128 + 1e-6);
}

TEST(V41Quant, LinearBf16AccumulatesPairsOddFirst) {
  // The bf16 Linear rounds once, after an f32 accumulator that takes each input pair
  // (2k, 2k+1) as VDPBF16PS does: product 2k+1 first, then 2k (torch's CPU kernel; the fixtures
  // need it). With s = 2^-24: in input order the two s add up to 2^-23 before the 1 arrives,
  // which lifts 1 + 2^-8 past the bf16 tie (-> 1 + 2^-7); in pair order each s meets the 1 alone,
  // is an f32 tie that rounds back to 1, and the sum ends on the tie (-> 1).
  const float s = std::ldexp(1.0f, -24);
  const float w[6] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  const float x[6] = {0.0f, s, s, 1.0f, std::ldexp(1.0f, -8), 0.0f};
  float y = 0.0f;
  linear_bf16(w, x, 1, 6, &y);
  EXPECT_EQ(y, 1.0f);
  float seq = 0.0f;
  for (int i = 0; i < 6; ++i) seq = std::fma(w[i], x[i], seq);
  EXPECT_EQ(bf(seq), 1.0078125f) << "input order would give the other neighbour";
  // odd length: the last input is added alone, after every pair
  const float x3[3] = {1.0f, s, std::ldexp(1.0f, -8)};
  linear_bf16(w, x3, 1, 3, &y);
  EXPECT_EQ(y, 1.0f);
}

// Scalar attention from the equations, independent of attend_head's loops.
void attend_ref(const std::vector<float>& q, const std::vector<std::vector<float>>& K, float scale,
                float sink, std::vector<float>* out) {
  const size_t n = K.size(), hd = q.size();
  std::vector<float> s(n);
  float m = -1e30f;
  for (size_t j = 0; j < n; ++j) {
    double dot = 0;
    for (size_t d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * K[j][d];
    s[j] = static_cast<float>(dot) * scale;
    m = std::max(m, s[j]);
  }
  double den = 0;
  std::vector<float> p(n);
  for (size_t j = 0; j < n; ++j) {
    p[j] = std::exp(s[j] - m);
    den += p[j];
  }
  const float denf = static_cast<float>(den) + std::exp(sink - m);
  out->assign(hd, 0.0f);
  for (size_t d = 0; d < hd; ++d) {
    double acc = 0;
    for (size_t j = 0; j < n; ++j) acc += static_cast<double>(bf(p[j])) * K[j][d];
    (*out)[d] = bf(static_cast<float>(acc) / denf);
  }
}

TEST(V41Attention, SinkOutsideMaxAndBf16Probabilities) {
  std::mt19937 g(3);
  const int hd = 64;
  for (float sink : {-2.0f, 0.3f, 6.0f}) {  // 6: the sink dominates the denominator
    auto q = randv(g, hd, 1.0f);
    std::vector<std::vector<float>> K(5);
    for (auto& k : K) k = randv(g, hd, 1.0f);
    std::vector<const float*> kp;
    for (auto& k : K) kp.push_back(k.data());
    std::vector<float> got(hd), want;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    attend_head(q.data(), kp.data(), kp.size(), hd, scale, sink, true, got.data());
    attend_ref(q, K, scale, sink, &want);
    for (int d = 0; d < hd; ++d) EXPECT_EQ(got[d], want[d]) << "sink " << sink << " d " << d;
  }
  // One key: its weight is exactly 1 (exp(0)), so out = bf16(k / (1 + exp(sink - s))).
  std::vector<float> q(8, 0.0f), k(8, 1.0f), out(8);
  const float* kp = k.data();
  attend_head(q.data(), &kp, 1, 8, 1.0f, 0.0f, true, out.data());
  for (float v : out) EXPECT_EQ(v, 0.5f);
}

TEST(V41Mhc, CollapseAndPostFollowTheEquations) {
  std::mt19937 g(4);
  const int hc = 4;
  const int64_t D = 16;
  auto H = randv(g, static_cast<size_t>(hc) * D, 1.0f), y = randv(g, D, 1.0f);
  ds4::HcCoeffs co{};
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int s = 0; s < hc; ++s) {
    co.pre[s] = u(g);
    co.post[s] = 2 * u(g);
    for (int t = 0; t < hc; ++t) co.comb[s][t] = u(g);
  }
  std::vector<float> c(D);
  hc_collapse(H.data(), co.pre, hc, D, c.data());
  for (int64_t d = 0; d < D; ++d) {
    double want = 0;
    for (int s = 0; s < hc; ++s) want += static_cast<double>(co.pre[s]) * H[s * D + d];
    EXPECT_NEAR(c[d], want, std::fabs(want) / 128 + 1e-6);
  }
  std::vector<float> H2 = H;
  hc_post(co, y.data(), hc, D, H2.data());
  for (int t = 0; t < hc; ++t)
    for (int64_t d = 0; d < D; ++d) {
      double want = static_cast<double>(co.post[t]) * y[d];
      for (int s = 0; s < hc; ++s)
        want += static_cast<double>(co.comb[s][t]) * H[s * D + d];  // source s -> t
      EXPECT_NEAR(H2[t * D + d], want, std::fabs(want) / 128 + 1e-6) << t << "," << d;
    }
}

TEST(V41Mhc, SinglePassHandOff) {
  // One block: the attention input collapses with the previous site's pre (here the one-hot
  // of layer 0), the FFN input with the attention site's pre, and the FFN site's pre is what
  // the next layer (or the head) collapses with. Check that a one-hot pre reads stream 0
  // exactly and that the FFN collapse uses the attention-site weights, not the FFN site's.
  const int hc = 4;
  const int64_t D = 8;
  std::vector<float> H(static_cast<size_t>(hc) * D);
  for (int s = 0; s < hc; ++s)
    for (int64_t d = 0; d < D; ++d) H[s * D + d] = bf(0.25 * (s + 1) + 0.01 * d);
  const float one_hot[hc] = {1, 0, 0, 0};
  std::vector<float> u(D);
  hc_collapse(H.data(), one_hot, hc, D, u.data());
  for (int64_t d = 0; d < D; ++d) EXPECT_EQ(u[d], H[d]);
  ds4::HcCoeffs attn{}, ffn{};
  for (int s = 0; s < hc; ++s) {
    attn.pre[s] = s == 2 ? 1.0f : 0.0f;  // the attention site selects stream 2 for the FFN
    ffn.pre[s] = s == 3 ? 1.0f : 0.0f;
    attn.post[s] = ffn.post[s] = 0.0f;
    for (int t = 0; t < hc; ++t) attn.comb[s][t] = ffn.comb[s][t] = s == t ? 1.0f : 0.0f;
  }
  std::vector<float> y(D, 0.0f);
  hc_post(attn, y.data(), hc, D, H.data());  // identity mixing: streams unchanged
  hc_collapse(H.data(), attn.pre, hc, D, u.data());
  for (int64_t d = 0; d < D; ++d) EXPECT_EQ(u[d], H[2 * D + d]);
}

}  // namespace
}  // namespace strata::v41
