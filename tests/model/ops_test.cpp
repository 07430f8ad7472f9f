// kernels/ops.h against straightforward double-precision code: RMSNorm, RoPE NORM / NEOX,
// YaRN, softmax with scale / mask / sinks, SwiGLU variants, top-k.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace strata {
namespace {

std::vector<float> rnd(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

TEST(Ops, RmsNormMatchesDouble) {
  for (int n : {1, 7, 16, 64, 129}) {
    auto x = rnd(n, 1 + n), w = rnd(n, 100 + n);
    std::vector<float> y(n);
    rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double sc = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i] * sc * w[i], 1e-5 * (1 + std::fabs(x[i] * sc * w[i])));
    // No weight, in place.
    rms_norm(x.data(), nullptr, x.data(), n, 1e-6f);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(x[i], y[i] / w[i], 1e-4 * (1 + std::fabs(y[i] / w[i])));
  }
}

// Reference rotation in double: angle θ_i = p·base^(-2i/n_rot), pairs per style.
void rope_ref(RopeStyle st, int n_rot, double base, int64_t p, std::vector<double>& x,
              double freq_scale = 1.0, bool yarn = false, int n_ctx_orig = 0) {
  const int half = n_rot / 2;
  double low = 0, high = 0, msc = 1.0;
  if (yarn) {
    auto corr = [&](double b) {
      return n_rot * std::log(n_ctx_orig / (b * 2 * M_PI)) / (2 * std::log(base));
    };
    low = std::max(0.0, std::floor(corr(32.0)));
    high = std::min(n_rot - 1.0, std::ceil(corr(1.0)));
    msc = 1.0 + 0.1 * std::log(1.0 / freq_scale);
  }
  for (int i = 0; i < half; ++i) {
    const double te = p * std::pow(base, -2.0 * i / n_rot);
    double th = te * freq_scale;
    if (yarn) {
      const double y = (i - low) / std::max(0.001, high - low);
      const double ramp = 1 - std::min(1.0, std::max(0.0, y));
      th = te * freq_scale * (1 - ramp) + te * ramp;
    }
    const double c = std::cos(th) * msc, s = std::sin(th) * msc;
    const int a = st == RopeStyle::rope_style_neox ? i : 2 * i;
    const int b = st == RopeStyle::rope_style_neox ? i + half : 2 * i + 1;
    const double x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

TEST(Ops, RopeNormAndNeoxMatchDouble) {
  for (RopeStyle st : {RopeStyle::rope_style_norm, RopeStyle::rope_style_neox}) {
    for (int64_t p : {0, 1, 5, 127, 1000}) {
      const int n_rot = 16;
      RopeParams rp;
      rp.n_rot = n_rot;
      rp.freq_base = 1e6f;
      auto x = rnd(n_rot, 7 + p);
      std::vector<double> xd(x.begin(), x.end());
      std::vector<float> cache(n_rot);
      rope_cache(rp, p, 1.0f, cache.data());
      rope_apply(st, n_rot, cache.data(), x.data());
      rope_ref(st, n_rot, 1e6, p, xd);
      // f32 angle accumulation: error grows with the angle (p up to 1000 rad).
      for (int i = 0; i < n_rot; ++i) EXPECT_NEAR(x[i], xd[i], 2e-4) << "pos " << p << " i " << i;
      // Inverse rotation restores the input.
      std::vector<float> inv(n_rot);
      rope_cache(rp, p, -1.0f, inv.data());
      rope_apply(st, n_rot, inv.data(), x.data());
      auto x0 = rnd(n_rot, 7 + p);
      for (int i = 0; i < n_rot; ++i) EXPECT_NEAR(x[i], x0[i], 1e-5);
    }
  }
}

TEST(Ops, RopeYarnMatchesDouble) {
  RopeParams rp;
  rp.n_rot = 16;
  rp.freq_base = 150000.0f;
  rp.freq_scale = 1.0f / 32.0f;
  rp.ext_factor = 1.0f;
  rp.n_ctx_orig = 4096;
  for (int64_t p : {0, 3, 200, 319}) {
    auto x = rnd(16, 40 + p);
    std::vector<double> xd(x.begin(), x.end());
    std::vector<float> cache(16);
    rope_cache(rp, p, 1.0f, cache.data());
    rope_apply(RopeStyle::rope_style_neox, 16, cache.data(), x.data());
    rope_ref(RopeStyle::rope_style_neox, 16, 150000.0, p, xd, 1.0 / 32.0, true, 4096);
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(x[i], xd[i], 1e-4) << "pos " << p << " i " << i;
  }
  // mscale = 1 + 0.1 ln 32 at position 0 (cos = 1).
  std::vector<float> cache(16);
  rope_cache(rp, 0, 1.0f, cache.data());
  EXPECT_NEAR(cache[0], 1.0 + 0.1 * std::log(32.0), 1e-6);
}

TEST(Ops, SoftmaxWithScaleMaskAndSink) {
  const int n = 37;
  auto x = rnd(n, 3, 3.0f);
  std::vector<float> mask(n, 0.0f);
  for (int i = 30; i < n; ++i) mask[i] = -std::numeric_limits<float>::infinity();
  const float scale = 0.25f, sink = 1.5f;
  std::vector<double> ref(n);
  double mx = sink;
  for (int i = 0; i < 30; ++i) mx = std::max(mx, double(x[i]) * scale);
  double sum = std::exp(sink - mx);
  for (int i = 0; i < 30; ++i) sum += std::exp(double(x[i]) * scale - mx);
  for (int i = 0; i < n; ++i) ref[i] = i < 30 ? std::exp(double(x[i]) * scale - mx) / sum : 0.0;
  softmax_scaled(x.data(), n, scale, mask.data(), &sink);
  double tot = 0;
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(x[i], ref[i], 1e-6);
    tot += x[i];
  }
  EXPECT_LT(tot, 1.0);  // the sink takes its share of the mass
  // Without a sink the row sums to 1.
  auto y = rnd(n, 4);
  softmax_inplace(y.data(), n);
  tot = 0;
  for (float v : y) tot += v;
  EXPECT_NEAR(tot, 1.0, 1e-6);
}

TEST(Ops, SwigluVariants) {
  const int n = 50;
  auto g = rnd(n, 5, 6.0f), u = rnd(n, 6, 6.0f);
  std::vector<float> o(n), oai(n), cl(n);
  swiglu(g.data(), u.data(), o.data(), n);
  swiglu_oai(g.data(), u.data(), oai.data(), n, 1.702f, 7.0f);
  swiglu_clamped(g.data(), u.data(), cl.data(), n, 4.0f);
  for (int i = 0; i < n; ++i) {
    const double gd = g[i], ud = u[i];
    EXPECT_NEAR(o[i], gd / (1 + std::exp(-gd)) * ud, 1e-5 * (1 + std::fabs(o[i])));
    const double x = std::min(gd, 7.0), y = std::clamp(ud, -7.0, 7.0);
    EXPECT_NEAR(oai[i], x / (1 + std::exp(-1.702 * x)) * (y + 1), 1e-5 * (1 + std::fabs(oai[i])));
    const double x4 = std::min(gd, 4.0), y4 = std::clamp(ud, -4.0, 4.0);
    EXPECT_NEAR(cl[i], x4 / (1 + std::exp(-x4)) * y4, 1e-5 * (1 + std::fabs(cl[i])));
  }
  EXPECT_FLOAT_EQ(softplus(25.0f), 25.0f);
  EXPECT_NEAR(softplus(0.0f), std::log(2.0), 1e-7);
}

TEST(Ops, TopKDescendingStable) {
  const float x[] = {0.1f, 0.9f, 0.3f, 0.9f, -1.0f, 0.5f};
  int32_t idx[4];
  top_k(x, 6, 4, idx);
  EXPECT_EQ(idx[0], 1);
  EXPECT_EQ(idx[1], 3);  // tie: lower index first
  EXPECT_EQ(idx[2], 5);
  EXPECT_EQ(idx[3], 2);
  int32_t all[6];
  top_k(x, 6, 6, all);
  EXPECT_EQ(all[5], 4);
}

}  // namespace
}  // namespace strata
