// AVX2 register tiles (avx2_gemm.cpp: Q8_0, Q4_0, MXFP4 against Q8_0; F16 against F16) against
// the scalar vec_dot, every tile shape nr × nt in 1..4 × 1..4 (the AVX2 tiles run nt in passes
// of 2 tokens), n = 256..4096, strided rows, plus operands at the int8 extremes the VPMADDUBSW
// pair sums are sized for (|w| = 128 against x = ±127, nibbles 15 / MXFP4 ±12).
// Error limit: |Δ| ≤ 1e-5 · Σ|w_i·x_i|. Per block the integer sums are exact and each block's
// term d_w·d_x·sum is formed with one rounding as in the reference; only the f32 summation order
// differs (8 lanes over n/256 … n/8 terms, then a horizontal sum), whose error is bounded by
// ~(n/8/8 + 3)·2^−24·Σ|terms| ≤ 4e-6·Σ|w_i·x_i| at n = 4096.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/traits.h"
#include "kernels/kernel_test_data.h"

namespace strata {
namespace {

using kernel_test::abs_dot;
using kernel_test::gaussian;

const GgmlType kTypes[] = {GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4, GgmlType::f16};

// A weight row at the extremes: every Q8_0 quant −128, Q4_0 nibble 15 (value 7) or 0 (−8),
// MXFP4 nibble 7 (+12 doubled) or 15 (−12); f16 ±65504.
void extreme_weight_row(GgmlType t, uint8_t* dst, int64_t n, int r) {
  const size_t bytes = row_bytes(t, n);
  if (t == GgmlType::f16) {
    uint16_t* h = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16((i + r) % 2 ? 65504.0f : -65504.0f);
    return;
  }
  const size_t bs = type_info(t).type_size;
  for (size_t b = 0; b < bytes / bs; ++b) {
    uint8_t* blk = dst + b * bs;
    if (t == GgmlType::q8_0) {
      reinterpret_cast<BlockQ8_0*>(blk)->d = f32_to_fp16(0.5f);
      std::memset(reinterpret_cast<BlockQ8_0*>(blk)->qs, 0x80, 32);
    } else if (t == GgmlType::q4_0) {
      reinterpret_cast<BlockQ4_0*>(blk)->d = f32_to_fp16(0.5f);
      std::memset(reinterpret_cast<BlockQ4_0*>(blk)->qs, r % 2 ? 0xff : 0x00, 16);
    } else {
      reinterpret_cast<BlockMxfp4*>(blk)->e = static_cast<uint8_t>(120 + r);
      std::memset(reinterpret_cast<BlockMxfp4*>(blk)->qs, r % 2 ? 0x77 : 0xff, 16);
    }
  }
}

// Activations at the extremes: Q8_0 quants all +127 or all −127 per token (never −128, the
// activation quantizer's range); f16 ±1.
void extreme_act_row(GgmlType xt, uint8_t* dst, int64_t n, int t) {
  if (xt == GgmlType::f16) {
    uint16_t* h = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(t % 2 ? 1.0f : -1.0f);
    return;
  }
  BlockQ8_0* b = reinterpret_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    b[i].d = f32_to_fp16(0.25f);
    std::memset(b[i].qs, t % 2 ? 127 : -127, 32);
  }
}

class GemmAvx2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "CPU lacks avx2";
  }
};

TEST_F(GemmAvx2, TilesRegistered) {
  for (GgmlType t : kTypes)
    EXPECT_NE(kernel_traits(t, Isa::avx2).gemm, nullptr) << type_name(t) << " has no AVX2 tile";
}

TEST_F(GemmAvx2, TilesMatchScalarVecDot) {
  int checked = 0;
  for (GgmlType t : kTypes) {
    const KernelTraits& k = kernel_traits(t, Isa::avx2);
    ASSERT_NE(k.gemm, nullptr) << type_name(t);
    const QuantRef& ref = *quant_ref(t);
    const GgmlType xt = ref.vec_dot_type;
    for (int64_t n : {256, 288, 1024, 2080, 4096, 4099}) {
      if (n % type_info(t).block_size != 0) continue;  // 4099: f16's scalar tail only
      for (bool extreme : {false, true}) {
        const size_t ws = row_bytes(t, n) + 8;  // padded stride: rows are not contiguous
        std::vector<uint8_t> w(ws * kGemmTileRows);
        for (int r = 0; r < kGemmTileRows; ++r) {
          if (extreme)
            extreme_weight_row(t, w.data() + r * ws, n, r);
          else
            ref.from_float(gaussian(n, static_cast<uint32_t>(n + r)).data(), w.data() + r * ws, n);
        }
        std::vector<std::vector<uint8_t>> x(kGemmTileTokens, std::vector<uint8_t>(row_bytes(xt, n)));
        for (int i = 0; i < kGemmTileTokens; ++i) {
          if (extreme)
            extreme_act_row(xt, x[i].data(), n, i);
          else
            quant_ref(xt)->from_float(gaussian(n, static_cast<uint32_t>(7 * n + i + 100)).data(), x[i].data(),
                                      n);
        }
        const void* xs[kGemmTileTokens];
        for (int i = 0; i < kGemmTileTokens; ++i) xs[i] = x[i].data();
        for (int nr = 1; nr <= kGemmTileRows; ++nr) {
          for (int nt = 1; nt <= kGemmTileTokens; ++nt) {
            std::vector<std::vector<float>> y(kGemmTileTokens, std::vector<float>(kGemmTileRows + 1, -7.0f));
            float* ys[kGemmTileTokens];
            for (int i = 0; i < kGemmTileTokens; ++i) ys[i] = y[i].data();
            k.gemm(n, w.data(), ws, nr, xs, nt, ys);
            for (int i = 0; i < kGemmTileTokens; ++i) {
              for (int r = 0; r <= kGemmTileRows; ++r) {
                if (i >= nt || r >= nr) {
                  ASSERT_EQ(y[i][r], -7.0f) << type_name(t) << " wrote outside the tile";
                  continue;
                }
                const float want = ref.vec_dot(n, w.data() + r * ws, x[i].data());
                const double mag = abs_dot(t, w.data() + r * ws, xt, x[i].data(), n);
                ASSERT_TRUE(std::isfinite(want)) << type_name(t) << " n=" << n;
                ASSERT_LE(std::fabs(double(y[i][r]) - want), 1e-5 * mag + 1e-30)
                    << type_name(t) << " n=" << n << (extreme ? " extreme" : "") << " tile " << nr << "x"
                    << nt << " r=" << r << " t=" << i << ": " << y[i][r] << " vs " << want;
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// Extreme operands give exact integer sums: the tile must equal the reference exactly when every
// block's term is the same power-of-two multiple (no rounding anywhere), which catches a
// saturated VPMADDUBSW pair even where 1e-5 relative would hide it.
TEST_F(GemmAvx2, ExtremeQ8_0IsExact) {
  const int64_t n = 1024;
  const size_t rb = row_bytes(GgmlType::q8_0, n);
  std::vector<uint8_t> w(rb), x(rb);
  extreme_weight_row(GgmlType::q8_0, w.data(), n, 0);  // all −128 · 0.5
  extreme_act_row(GgmlType::q8_0, x.data(), n, 1);     // all +127 · 0.25
  const void* xs[1] = {x.data()};
  float y0 = 0;
  float* ys[1] = {&y0};
  kernel_traits(GgmlType::q8_0, Isa::avx2).gemm(n, w.data(), rb, 1, xs, 1, ys);
  EXPECT_EQ(y0, -128.0f * 127.0f * 0.125f * static_cast<float>(n));
}

}  // namespace
}  // namespace strata
