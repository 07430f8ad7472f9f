// The reference's f32 arithmetic that deepseek_v41 reproduces bit for bit (v41_quant.h,
// v41_blocks.h): the OpenBLAS summation orders of the f32 Linears, torch's vectorized exp, and
// the mHC Sinkhorn built on it. Each check is written from the stated order, not from the code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/deepseek4/ds4_mhc.h"
#include "model/deepseek_v41/v41_blocks.h"
#include "model/deepseek_v41/v41_quant.h"

namespace strata::v41 {
namespace {

TEST(V41RefNumerics, F32LinearKernelChoice) {
  // BLAS M = n_out, N = tokens: the small-matrix kernel while n_out*tokens <= 1200 and
  // n_out*tokens*K <= 1e6 (and K >= 32).
  EXPECT_TRUE(f32_gemm_small(24, 512, 50));   // mHC mixes up to 50 tokens
  EXPECT_FALSE(f32_gemm_small(24, 512, 51));  // ... the blocked kernel beyond
  EXPECT_TRUE(f32_gemm_small(128, 128, 9));   // ratio-2 compressor up to 9 tokens
  EXPECT_FALSE(f32_gemm_small(128, 128, 10));
  EXPECT_TRUE(f32_gemm_small(256, 128, 1));  // the head, one row
  EXPECT_FALSE(f32_gemm_small(256, 128, 5));
  EXPECT_FALSE(f32_gemm_small(4, 16, 1));      // K < 32
  EXPECT_FALSE(f32_gemm_small(8, 20000, 10));  // n_out*tokens*K > 1e6
}

TEST(V41RefNumerics, F32LinearSmallKernelSumsSixteenLanes) {
  // K = 32, w = 1: x[0] = 2^24 and x[16] = -2^24 share lane 0 and cancel exactly there, so the
  // small kernel keeps the 1 in lane 1; one running sum loses it (2^24 + 1 rounds to 2^24).
  const int K = 32;
  std::vector<float> w(K, 1.0f), x(K, 0.0f);
  x[0] = 16777216.0f;
  x[1] = 1.0f;
  x[16] = -16777216.0f;
  float y = -1.0f;
  linear_f32(w.data(), x.data(), 1, K, 1, &y);
  EXPECT_EQ(y, 1.0f);
  linear_f32(w.data(), x.data(), 1, K, 100000, &y);  // blocked: one FMA chain
  EXPECT_EQ(y, 0.0f);
  // Lane groups: ((l0+l1)+(l2+l3)) per group of four, then (g0+g1)+(g2+g3).
  std::fill(x.begin(), x.end(), 0.0f);
  x[0] = 16777216.0f;   // group 0
  x[4] = 1.0f;          // group 1
  x[5] = 1.0f;          // group 1: g1 = 2, so g0 + g1 = 2^24 + 2 (exact)
  x[8] = -16777216.0f;  // group 2
  linear_f32(w.data(), x.data(), 1, K, 1, &y);
  EXPECT_EQ(y, 2.0f);  // (2^24 + 2) + (-2^24 + 0) = 2
}

TEST(V41RefNumerics, F32LinearBlockedSplitsK) {
  // K = 512 on the blocked kernel: two FMA chains of 256, added at the end. x[0] = 2^24 with 256
  // ones behind it in the first block loses them all; the second block's 256 ones survive.
  const int K = 512;
  std::vector<float> w(K, 1.0f), x(K, 1.0f);
  x[0] = 16777216.0f;
  x[256] = -16777216.0f;
  float y = 0.0f;
  linear_f32(w.data(), x.data(), 1, K, 100000, &y);
  // block 0: 2^24 (+1 x 255 lost); block 1: -2^24 + 255 = -16776961 (exact); sum = -16776961 + 2^24.
  EXPECT_EQ(y, 255.0f);
}

TEST(V41RefNumerics, TorchSumAccumulatorOrder) {
  // n = 128: sixteen 8-lane vectors; accumulator k takes vectors k, k+4, k+8, k+12. 2^24 (vector
  // 0) and -2^24 (vector 8) meet in accumulator 0 and cancel; the 1 in vector 1 (accumulator 1)
  // survives. A running sum loses it (2^24 + 1 = 2^24). torch.sum gives 1 (measured).
  std::vector<float> x(128, 0.0f);
  x[0] = 16777216.0f;
  x[8] = 1.0f;
  x[64] = -16777216.0f;
  EXPECT_EQ(torch_sum_f32(x.data(), 128), 1.0f);
  // The same 1 in vector 4 lands in accumulator 0 between the two: lost, as in torch (0).
  std::vector<float> y(512, 0.0f);
  y[0] = 16777216.0f;
  y[32] = 1.0f;
  y[64] = -16777216.0f;
  EXPECT_EQ(torch_sum_f32(y.data(), 512), 0.0f);
  // Plain values: close to the exact sum; mean of squares divides by n.
  std::vector<float> z(100);
  double exact = 0.0, sq = 0.0;
  for (int i = 0; i < 100; ++i) {
    z[i] = 0.01f * static_cast<float>(i) - 0.37f;
    exact += z[i];
    sq += static_cast<double>(z[i]) * z[i];
  }
  EXPECT_NEAR(torch_sum_f32(z.data(), 100), exact, 1e-4);
  EXPECT_NEAR(torch_mean_sq_f32(z.data(), 100), sq / 100.0, 1e-5);
}

TEST(V41RefNumerics, TorchVecExpWithinOneUlpAndMeasuredValues) {
  for (float v = -30.0f; v < 30.0f; v += 0.001953125f) {
    const float a = torch_vec_expf(v), b = std::exp(v);
    EXPECT_LE(std::fabs(a - b), std::fabs(b) * 1.2e-7f) << v;
  }
  // torch.exp (torch 1.13, AVX2 capability) on these inputs, one ulp above the correctly rounded
  // value that std::exp returns (0.296242088, 0.833364785).
  EXPECT_EQ(torch_vec_expf(-1.21657825f), 0.296242118f);
  EXPECT_EQ(torch_vec_expf(-0.182283789f), 0.833364844f);
  EXPECT_EQ(torch_vec_expf(0.0f), 1.0f);
  EXPECT_EQ(torch_vec_expf(-105.0f), 0.0f);
  EXPECT_TRUE(std::isinf(torch_vec_expf(101.0f)));
}

TEST(V41RefNumerics, SinkhornSiteIsDoublyStochastic) {
  std::mt19937 g(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int hc = 4, nmix = (2 + hc) * hc;
  std::vector<float> mixes(nmix), base(nmix);
  for (float& v : mixes) v = d(g);
  for (float& v : base) v = 0.5f * d(g);
  const float scale[3] = {0.7f, 1.3f, 2.0f}, eps = 1e-6f;
  ds4::HcCoeffs co{}, ref{};
  hc_site_coeffs(mixes.data(), scale, base.data(), hc, 20, eps, &co);
  ds4::hc_coeffs(mixes.data(), scale, base.data(), hc, 20, eps, &ref);  // same maths, other rounding
  for (int i = 0; i < hc; ++i) {
    const float want_pre = 1.0f / (1.0f + std::exp(-(base[i] + mixes[i] * scale[0]))) + eps;
    EXPECT_EQ(co.pre[i], want_pre);
    EXPECT_NEAR(co.post[i], ref.post[i], 1e-6f);
    float row = 0.0f, col = 0.0f;
    for (int j = 0; j < hc; ++j) {
      row += co.comb[i][j];
      col += co.comb[j][i];
      EXPECT_NEAR(co.comb[i][j], ref.comb[i][j], 1e-5f);
    }
    EXPECT_NEAR(col, 1.0f, 1e-5f);
    EXPECT_NEAR(row, 1.0f, 3e-2f);  // 20 iterations end on a column pass
  }
}

}  // namespace
}  // namespace strata::v41
