// mHC blocks vs a double-precision implementation written from deepseek-v4.md §2.2.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/deepseek4/ds4_mhc.h"
#include "model/ds4_test_util.h"

namespace strata::ds4 {
namespace {

using testing::max_rel_err;
using testing::randn;

double sig(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

struct RefCoeffs {
  double pre[4], post[4], comb[4][4];
};

// Straight from the equations: r = f/rms(f), m = fn.r, pre/post/Sinkhorn(comb).
RefCoeffs ref_coeffs(const std::vector<float>& H, int d, const std::vector<float>& fn, const float* scale,
                     const float* base, int iters, double eps, double hc_eps,
                     std::vector<double>* mixes_out) {
  const int n = 4 * d;
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(H[i]) * H[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  std::vector<double> m(24, 0.0);
  for (int k = 0; k < 24; ++k)
    for (int i = 0; i < n; ++i) m[k] += double(fn[k * n + i]) * H[i] * inv;
  if (mixes_out) *mixes_out = m;
  RefCoeffs r{};
  for (int i = 0; i < 4; ++i) {
    r.pre[i] = sig(scale[0] * m[i] + base[i]) + hc_eps;
    r.post[i] = 2.0 * sig(scale[1] * m[4 + i] + base[4 + i]);
  }
  double C[4][4];
  for (int a = 0; a < 4; ++a) {
    double mx = -1e300, sum = 0;
    for (int b = 0; b < 4; ++b) {
      C[a][b] = scale[2] * m[8 + 4 * a + b] + base[8 + 4 * a + b];
      mx = std::max(mx, C[a][b]);
    }
    for (int b = 0; b < 4; ++b) sum += std::exp(C[a][b] - mx);
    for (int b = 0; b < 4; ++b) C[a][b] = std::exp(C[a][b] - mx) / sum + hc_eps;
  }
  auto cols = [&] {
    for (int b = 0; b < 4; ++b) {
      double s = hc_eps;
      for (int a = 0; a < 4; ++a) s += C[a][b];
      for (int a = 0; a < 4; ++a) C[a][b] /= s;
    }
  };
  auto rows = [&] {
    for (int a = 0; a < 4; ++a) {
      double s = hc_eps;
      for (int b = 0; b < 4; ++b) s += C[a][b];
      for (int b = 0; b < 4; ++b) C[a][b] /= s;
    }
  };
  cols();
  for (int it = 1; it < iters; ++it) {
    rows();
    cols();
  }
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) r.comb[a][b] = C[a][b];
  return r;
}

TEST(Ds4Mhc, CoefficientsMatchDoubleReference) {
  const int d = 64, hc = 4, n_mix = 24;
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    auto H = randn(hc * d, seed);
    auto fn = randn(n_mix * hc * d, seed + 100, 1.0f / 16.0f);
    auto base = randn(n_mix, seed + 200, 0.5f);
    const float scale[3] = {0.7f, 1.3f, 2.0f};
    std::vector<float> mixes(n_mix);
    hc_mixes(H.data(), hc, d, fn.data(), n_mix, 1e-6f, mixes.data());
    HcCoeffs c;
    hc_coeffs(mixes.data(), scale, base.data(), hc, 20, 1e-6f, &c);
    std::vector<double> mref;
    RefCoeffs r = ref_coeffs(H, d, fn, scale, base.data(), 20, 1e-6, 1e-6, &mref);
    EXPECT_LT(max_rel_err(mixes.data(), mref.data(), n_mix), 1e-5);
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(c.pre[i], r.pre[i], 1e-6) << i;
      EXPECT_NEAR(c.post[i], r.post[i], 1e-6) << i;
      for (int j = 0; j < 4; ++j) EXPECT_NEAR(c.comb[i][j], r.comb[i][j], 1e-6) << i << "," << j;
    }
  }
}

TEST(Ds4Mhc, SinkhornIsNearlyDoublyStochastic) {
  auto logits = randn(16, 7, 1.0f);
  float C[16];
  std::copy(logits.begin(), logits.end(), C);
  hc_sinkhorn(C, 4, 20, 1e-6f);
  for (int a = 0; a < 4; ++a) {
    float row = 0, col = 0;
    for (int b = 0; b < 4; ++b) {
      row += C[a * 4 + b];
      col += C[b * 4 + a];
      EXPECT_GT(C[a * 4 + b], 0.0f);
    }
    EXPECT_NEAR(col, 1.0f, 1e-5f);  // the last step normalises columns
    EXPECT_NEAR(row, 1.0f, 2e-3f);
  }
  // One iteration = softmax over destinations + one column normalisation only.
  std::copy(logits.begin(), logits.end(), C);
  hc_sinkhorn(C, 4, 1, 0.0f);
  for (int b = 0; b < 4; ++b) {
    float col = 0;
    for (int a = 0; a < 4; ++a) col += C[a * 4 + b];
    EXPECT_NEAR(col, 1.0f, 1e-6f);
  }
}

TEST(Ds4Mhc, CollapsePostAndHeadMatchEquations) {
  const int d = 32, hc = 4;
  auto H = randn(hc * d, 11);
  auto y = randn(d, 12);
  auto w = randn(hc, 13);
  std::vector<float> u(d);
  hc_collapse(H.data(), w.data(), hc, d, u.data());
  for (int k = 0; k < d; ++k) {
    double ref = 0;
    for (int i = 0; i < hc; ++i) ref += double(w[i]) * H[i * d + k];
    EXPECT_NEAR(u[k], ref, 1e-5);
  }
  HcCoeffs c{};
  auto cm = randn(16, 14);
  for (int i = 0; i < 4; ++i) {
    c.post[i] = 0.3f * (i + 1);
    for (int j = 0; j < 4; ++j) c.comb[i][j] = cm[i * 4 + j];
  }
  std::vector<float> Ho(hc * d);
  hc_post(y.data(), H.data(), c, hc, d, Ho.data());
  for (int t = 0; t < hc; ++t)
    for (int k = 0; k < d; ++k) {
      double ref = double(c.post[t]) * y[k];
      for (int s = 0; s < hc; ++s) ref += double(c.comb[s][t]) * H[s * d + k];  // C[source][dest]
      EXPECT_NEAR(Ho[t * d + k], ref, 1e-5);
    }
  const float m[4] = {0.5f, -1.0f, 2.0f, 0.0f}, base[4] = {0.1f, 0.2f, -0.3f, 0.0f}, scale = 1.5f;
  float p[4];
  hc_head_weights(m, &scale, base, 4, 1e-6f, p);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(p[i], sig(1.5 * m[i] + base[i]) + 1e-6, 1e-7);
}

}  // namespace
}  // namespace strata::ds4
