// The AVX2 F16 and BF16 many-token panels (KernelTraits::gemm_panel at Isa::avx2) against the
// scalar vec_dot. Inputs: weights and half the tokens raw random finite values (F16: every
// exponent; BF16: exponents within 2^±24, so no product overflows; subnormals included, no inf or
// NaN), some rows and tokens subnormal only; the other tokens the conversion of Gaussian rows. Lengths from 1
// to 4096 around the 16-position groups and the 1024-element K chunks (not multiples of 8 or 16 too), odd row
// counts around the 2-, 3- and 4-row tiles, every token count 1..64 (the 6-token tiles and their near-equal
// splits), padded row strides. Error limit |Δ| ≤ 1e-5·Σ|w_i·x_i| + 1e-30: products of halves or bfloat16s are
// exact in f32 (but for BF16 products below f32's normal range: the 1e-30), and each is added into an f32 sum
// at most 64 (a lane of a chunk) + 4 (the reduction) + n/1024 (the chunks) times, so the summation error
// stays below 72·2^−24 ≈ 4.3e-6 of Σ|w_i·x_i| for n ≤ 4096. An element must not depend on which rows and
// tokens share the call (bit-identical to a one-row, one-token call), nothing outside [nr) × [nt) may be
// written, and where the CPU has AVX-512 the AVX2 F16 panel must give the AVX-512 F16 panel's bits (same
// per-element arithmetic; BF16 has no AVX-512 panel: the AVX-512 table inherits the AVX2 one).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/kernel_test_data.h"
#include "kernels/traits.h"

namespace strata {
namespace {

using kernel_test::abs_dot;
using kernel_test::gaussian;

const GgmlType kTypes[] = {GgmlType::f16, GgmlType::bf16};

// A random finite value: any sign and mantissa; F16 exponent field 0..30 (0: zero or subnormal),
// BF16 0 or 103..151 (2^−24..2^24); with subnormal_only the exponent field is 0.
uint16_t random_value(GgmlType t, std::mt19937& rng, bool subnormal_only) {
  const uint32_t sign = rng() & 1;
  if (t == GgmlType::f16) {
    const uint32_t exp = subnormal_only ? 0 : rng() % 31;
    return static_cast<uint16_t>(sign << 15 | exp << 10 | (rng() & 0x3ff));
  }
  const uint32_t k = rng() % 50;
  const uint32_t exp = subnormal_only || k == 0 ? 0 : 102 + k;
  return static_cast<uint16_t>(sign << 15 | exp << 7 | (rng() & 0x7f));
}

// n values at p; seeds ≡ 0 (mod 5) give a subnormal-only row.
void random_values(GgmlType t, uint16_t* p, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const bool sub = seed % 5 == 0;
  for (int64_t i = 0; i < n; ++i) p[i] = random_value(t, rng, sub);
}

struct Case {
  int64_t n, nr;
};

// Every case of one type; returns the elements checked against vec_dot and against AVX-512.
void check_type(GgmlType type, int64_t* checked, int64_t* crossed) {
  const Case cases[] = {{1, 1},     {7, 3},    {16, 5},    {33, 4},   {100, 9},  {1000, 7}, {1024, 2},
                        {1031, 11}, {1040, 6}, {2047, 13}, {3000, 1}, {4096, 5}, {4081, 3}};
  const char* tn = type_name(type);
  const KernelTraits& k = kernel_traits(type, Isa::avx2);
  ASSERT_NE(k.gemm_panel, nullptr) << tn << ": no AVX2 panel registered";
  const bool cross = type == GgmlType::f16 && isa_supported(Isa::avx512);
  const KernelTraits& k512 = kernel_traits(type, Isa::avx512);
  const QuantRef& ref = *quant_ref(type);
  for (const Case& c : cases) {
    const size_t rb = row_bytes(type, c.n), ws = rb + 6;  // padded stride, rows 2-byte aligned only
    std::vector<uint8_t> w(ws * static_cast<size_t>(c.nr));
    for (int64_t r = 0; r < c.nr; ++r)
      random_values(type, reinterpret_cast<uint16_t*>(w.data() + r * ws), c.n,
                    static_cast<uint32_t>(c.n * 31 + r));
    // Tokens one element past their row (odd addresses in halves): the panel must not need alignment.
    std::vector<std::vector<uint16_t>> xbuf(kGemmPanelTokens, std::vector<uint16_t>(c.n + 1));
    std::vector<const uint8_t*> x(kGemmPanelTokens);
    for (int i = 0; i < kGemmPanelTokens; ++i) {
      uint16_t* xi = xbuf[i].data() + 1;
      if (i % 2 == 0)
        ref.from_float(gaussian(c.n, static_cast<uint32_t>(7 * c.n + i + 100)).data(), xi, c.n);
      else
        random_values(type, xi, c.n, static_cast<uint32_t>(5 * c.n + i));
      x[i] = reinterpret_cast<const uint8_t*>(xi);
    }
    std::vector<std::vector<float>> want(kGemmPanelTokens, std::vector<float>(c.nr));
    std::vector<std::vector<double>> mag(kGemmPanelTokens, std::vector<double>(c.nr));
    for (int i = 0; i < kGemmPanelTokens; ++i)
      for (int64_t r = 0; r < c.nr; ++r) {
        want[i][r] = ref.vec_dot(c.n, w.data() + r * ws, x[i]);
        mag[i][r] = abs_dot(type, w.data() + r * ws, type, x[i], c.n);
      }
    for (int nt = 1; nt <= kGemmPanelTokens; ++nt) {
      std::vector<std::vector<float>> y(kGemmPanelTokens, std::vector<float>(c.nr + 1, -7.0f));
      std::vector<const void*> xs(static_cast<size_t>(nt));
      std::vector<float*> ys(static_cast<size_t>(nt));
      for (int i = 0; i < nt; ++i) xs[i] = x[i], ys[i] = y[i].data();
      k.gemm_panel(c.n, w.data(), ws, c.nr, xs.data(), nt, ys.data());
      for (int i = 0; i < kGemmPanelTokens; ++i) {
        ASSERT_EQ(y[i][c.nr], -7.0f) << tn << " nt=" << nt << " wrote past row " << c.nr;
        if (i >= nt) {
          ASSERT_EQ(y[i][0], -7.0f) << tn << " nt=" << nt << " wrote token " << i;
          continue;
        }
        for (int64_t r = 0; r < c.nr; ++r) {
          ASSERT_TRUE(std::isfinite(y[i][r])) << tn << " n=" << c.n << " r=" << r << " t=" << i;
          ASSERT_LE(std::fabs(double(y[i][r]) - want[i][r]), 1e-5 * mag[i][r] + 1e-30)
              << tn << " n=" << c.n << " nr=" << c.nr << " nt=" << nt << " r=" << r << " t=" << i << " got "
              << y[i][r] << " want " << want[i][r];
          ++*checked;
        }
      }
      // The same element from a call with only that row and token: bit-identical.
      if (nt % 13 == 0 || nt == kGemmPanelTokens) {
        for (int i = 0; i < nt; i += 5) {
          for (int64_t r = 0; r < c.nr; r += 2) {
            float one = -7.0f;
            float* yo = &one;
            const void* xo = x[i];
            k.gemm_panel(c.n, w.data() + r * ws, ws, 1, &xo, 1, &yo);
            ASSERT_EQ(one, y[i][r]) << tn << " n=" << c.n << " r=" << r << " t=" << i
                                    << ": result depends on the call's shape";
          }
        }
      }
      // The AVX-512 F16 panel's bits, where the CPU can run it.
      if (cross && nt % 7 == 1) {
        ASSERT_NE(k512.gemm_panel, nullptr);
        std::vector<std::vector<float>> z(static_cast<size_t>(nt), std::vector<float>(c.nr));
        std::vector<float*> zs(static_cast<size_t>(nt));
        for (int i = 0; i < nt; ++i) zs[i] = z[i].data();
        k512.gemm_panel(c.n, w.data(), ws, c.nr, xs.data(), nt, zs.data());
        for (int i = 0; i < nt; ++i)
          for (int64_t r = 0; r < c.nr; ++r) {
            ASSERT_EQ(z[i][r], y[i][r])
                << "n=" << c.n << " r=" << r << " t=" << i << ": AVX2 and AVX-512 F16 panels differ";
            ++*crossed;
          }
      }
    }
  }
}

TEST(GemmPanelF16Avx2, MatchesScalarVecDot) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "CPU lacks avx2";
  for (GgmlType t : kTypes) {
    int64_t checked = 0, crossed = 0;
    check_type(t, &checked, &crossed);
    if (HasFatalFailure()) return;
    EXPECT_GT(checked, 0) << type_name(t);
    if (t == GgmlType::f16 && isa_supported(Isa::avx512)) {
      EXPECT_GT(crossed, 0);
    }
  }
}

// Exactly representable sums: weights and activations small integers (|v| ≤ 8), so every
// partial sum is an exact f32 integer and the panel must equal the scalar reference exactly,
// through the chunk boundaries and the zero-padded tails.
TEST(GemmPanelF16Avx2, IntegerInputsAreExact) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "CPU lacks avx2";
  std::mt19937 rng(42);
  for (GgmlType type : kTypes)
    for (const int64_t n : {int64_t{5}, int64_t{1023}, int64_t{1025}, int64_t{2064}, int64_t{4095}}) {
      const KernelTraits& k = kernel_traits(type, Isa::avx2);
      ASSERT_NE(k.gemm_panel, nullptr) << type_name(type);
      const QuantRef& ref = *quant_ref(type);
      const int64_t nr = 7;
      const int nt = 11;
      std::vector<uint16_t> w(static_cast<size_t>(n * nr)), x(static_cast<size_t>(n * nt));
      std::vector<float> wf(w.size()), xf(x.size());
      for (auto& v : wf) v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
      for (auto& v : xf) v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
      ref.from_float(wf.data(), w.data(), n * nr);
      ref.from_float(xf.data(), x.data(), n * nt);
      std::vector<std::vector<float>> y(nt, std::vector<float>(nr));
      std::vector<const void*> xs(nt);
      std::vector<float*> ys(nt);
      for (int i = 0; i < nt; ++i) xs[i] = x.data() + i * n, ys[i] = y[i].data();
      k.gemm_panel(n, w.data(), static_cast<size_t>(n) * 2, nr, xs.data(), nt, ys.data());
      for (int i = 0; i < nt; ++i)
        for (int64_t r = 0; r < nr; ++r)
          ASSERT_EQ(y[i][r], ref.vec_dot(n, w.data() + r * n, xs[i]))
              << type_name(type) << " n=" << n << " r=" << r << " t=" << i;
    }
}

}  // namespace
}  // namespace strata
