// The AVX2 F16 many-token panel (KernelTraits::gemm_panel for F16 at Isa::avx2) against the scalar
// vec_dot and the AVX2 one-token kernel. Inputs: weights and half the tokens raw random finite
// halves (every exponent, subnormals included; no inf or NaN), some rows and tokens subnormal
// only; the other tokens the F16 conversion of Gaussian rows. Lengths from 1 to 4200 around the
// 8-lane steps, the 1024-element sub-segments and the 2048-element segments (not multiples of 8
// too), odd row counts around the 2-, 3- and 4-row tiles and the 48-row carry blocks, every token
// count 1..64 (the 6-token tiles and their near-equal splits), padded row strides, unaligned
// activations.
// Error limit |Δ| ≤ 1e-5·Σ|w_i·x_i|: products of halves are exact in f32, and each is added into
// an f32 sum at most 256 (a lane of a segment) + 3 (the horizontal sum) + 7 (the tail) + 2 (the
// segments) times, so the summation error stays below 268·2^−24 ≈ 1.6e-5 of Σ|w_i·x_i| in the
// worst case; random data stay far below it (a mutated kernel does not).
// Bit-exact: every element equals the AVX2 gemv_f16 of its row and token (decode and prefill
// give the same bits), and for n ≤ 2048 the AVX2 4 × 4 tile; an element does not depend on which
// rows and tokens share the call; nothing outside [nr) × [nt) is written.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/kernel_test_data.h"
#include "kernels/traits.h"

namespace strata {
namespace {

using kernel_test::abs_dot;
using kernel_test::gaussian;

// n random finite halves at p: any sign and mantissa, exponent field 0..30 (0: zero or
// subnormal); seeds ≡ 0 (mod 5) give a subnormal-only row.
void random_halves(uint16_t* p, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const bool sub = seed % 5 == 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t sign = rng() & 1, exp = sub ? 0 : rng() % 31;
    p[i] = static_cast<uint16_t>(sign << 15 | exp << 10 | (rng() & 0x3ff));
  }
}

struct Case {
  int64_t n, nr;
};

TEST(GemmPanelF16Avx2, MatchesScalarVecDotAndGemvBits) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "CPU lacks avx2";
  const Case cases[] = {{1, 1},    {7, 3},    {16, 5},    {33, 4},    {100, 9},
                        {1000, 7}, {1024, 2}, {1031, 11}, {1040, 53}, {2047, 13},
                        {2048, 1}, {2055, 3}, {3000, 50}, {4096, 5},  {4200, 97}};
  const KernelTraits& k = kernel_traits(GgmlType::f16, Isa::avx2);
  ASSERT_NE(k.gemm_panel, nullptr) << "f16: no AVX2 panel registered";
  ASSERT_NE(k.gemv, nullptr);
  ASSERT_NE(k.gemm, nullptr);
  const QuantRef& ref = *quant_ref(GgmlType::f16);
  int64_t checked = 0;
  for (const Case& c : cases) {
    const size_t rb = row_bytes(GgmlType::f16, c.n), ws = rb + 6;  // padded stride, rows 2-byte aligned only
    std::vector<uint8_t> w(ws * static_cast<size_t>(c.nr));
    for (int64_t r = 0; r < c.nr; ++r)
      random_halves(reinterpret_cast<uint16_t*>(w.data() + r * ws), c.n, static_cast<uint32_t>(c.n * 31 + r));
    // Tokens one element into their buffer (odd addresses in halves): the panel must not need alignment.
    std::vector<std::vector<uint16_t>> xbuf(kGemmPanelTokens, std::vector<uint16_t>(c.n + 1));
    std::vector<const uint8_t*> x(kGemmPanelTokens);
    for (int i = 0; i < kGemmPanelTokens; ++i) {
      uint16_t* xi = xbuf[i].data() + 1;
      if (i % 2 == 0)
        ref.from_float(gaussian(c.n, static_cast<uint32_t>(7 * c.n + i + 100)).data(), xi, c.n);
      else
        random_halves(xi, c.n, static_cast<uint32_t>(5 * c.n + i));
      x[i] = reinterpret_cast<const uint8_t*>(xi);
    }
    // The scalar reference, its error scale, and the one-token kernel's bits per (token, row).
    std::vector<std::vector<float>> want(kGemmPanelTokens, std::vector<float>(c.nr));
    std::vector<std::vector<double>> mag(kGemmPanelTokens, std::vector<double>(c.nr));
    std::vector<std::vector<float>> gemv(kGemmPanelTokens, std::vector<float>(c.nr));
    for (int i = 0; i < kGemmPanelTokens; ++i) {
      k.gemv(c.n, w.data(), ws, c.nr, x[i], gemv[i].data());
      for (int64_t r = 0; r < c.nr; ++r) {
        want[i][r] = ref.vec_dot(c.n, w.data() + r * ws, x[i]);
        mag[i][r] = abs_dot(GgmlType::f16, w.data() + r * ws, GgmlType::f16, x[i], c.n);
      }
    }
    for (int nt = 1; nt <= kGemmPanelTokens; ++nt) {
      std::vector<std::vector<float>> y(kGemmPanelTokens, std::vector<float>(c.nr + 1, -7.0f));
      std::vector<const void*> xs(static_cast<size_t>(nt));
      std::vector<float*> ys(static_cast<size_t>(nt));
      for (int i = 0; i < nt; ++i) xs[i] = x[i], ys[i] = y[i].data();
      k.gemm_panel(c.n, w.data(), ws, c.nr, xs.data(), nt, ys.data());
      for (int i = 0; i < kGemmPanelTokens; ++i) {
        ASSERT_EQ(y[i][c.nr], -7.0f) << "nt=" << nt << " wrote past row " << c.nr;
        if (i >= nt) {
          ASSERT_EQ(y[i][0], -7.0f) << "nt=" << nt << " wrote token " << i;
          continue;
        }
        for (int64_t r = 0; r < c.nr; ++r) {
          ASSERT_TRUE(std::isfinite(y[i][r])) << "n=" << c.n << " r=" << r << " t=" << i;
          ASSERT_LE(std::fabs(double(y[i][r]) - want[i][r]), 1e-5 * mag[i][r] + 1e-30)
              << "n=" << c.n << " nr=" << c.nr << " nt=" << nt << " r=" << r << " t=" << i << " got "
              << y[i][r] << " want " << want[i][r];
          ASSERT_EQ(y[i][r], gemv[i][r]) << "n=" << c.n << " nr=" << c.nr << " nt=" << nt << " r=" << r
                                         << " t=" << i << ": panel and gemv_f16 differ";
          ++checked;
        }
      }
    }
    // The 4 × 4 tiles (the old prefill path) agree too while one segment covers the row.
    if (c.n <= 2048) {
      const int nt = 4;
      const int nr = static_cast<int>(std::min<int64_t>(c.nr, kGemmTileRows));
      std::vector<std::vector<float>> z(nt, std::vector<float>(nr));
      std::vector<const void*> xs(nt);
      std::vector<float*> zs(nt);
      for (int i = 0; i < nt; ++i) xs[i] = x[i], zs[i] = z[i].data();
      k.gemm(c.n, w.data(), ws, nr, xs.data(), nt, zs.data());
      for (int i = 0; i < nt; ++i)
        for (int r = 0; r < nr; ++r)
          ASSERT_EQ(z[i][r], gemv[i][r])
              << "n=" << c.n << " r=" << r << " t=" << i << ": tile and gemv differ";
    }
  }
  EXPECT_GT(checked, 0);
}

// Exactly representable sums: weights and activations small integers (|v| ≤ 8), so every
// partial sum is an exact f32 integer and the panel must equal the scalar reference exactly,
// through the segment and sub-segment boundaries, the carry blocks and the scalar tails.
TEST(GemmPanelF16Avx2, IntegerInputsAreExact) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "CPU lacks avx2";
  const KernelTraits& k = kernel_traits(GgmlType::f16, Isa::avx2);
  ASSERT_NE(k.gemm_panel, nullptr);
  const QuantRef& ref = *quant_ref(GgmlType::f16);
  std::mt19937 rng(42);
  for (const int64_t n : {int64_t{5}, int64_t{1023}, int64_t{1025}, int64_t{2064}, int64_t{4095}}) {
    const int64_t nr = 61;
    const int nt = 11;
    std::vector<uint16_t> w(static_cast<size_t>(n * nr)), x(static_cast<size_t>(n * nt));
    for (auto& v : w) v = f32_to_fp16(static_cast<float>(static_cast<int>(rng() % 17) - 8));
    for (auto& v : x) v = f32_to_fp16(static_cast<float>(static_cast<int>(rng() % 17) - 8));
    std::vector<std::vector<float>> y(nt, std::vector<float>(nr));
    std::vector<const void*> xs(nt);
    std::vector<float*> ys(nt);
    for (int i = 0; i < nt; ++i) xs[i] = x.data() + i * n, ys[i] = y[i].data();
    k.gemm_panel(n, w.data(), static_cast<size_t>(n) * 2, nr, xs.data(), nt, ys.data());
    for (int i = 0; i < nt; ++i)
      for (int64_t r = 0; r < nr; ++r)
        ASSERT_EQ(y[i][r], ref.vec_dot(n, w.data() + r * n, xs[i])) << "n=" << n << " r=" << r << " t=" << i;
  }
}

}  // namespace
}  // namespace strata
