// Register-tile kernels (KernelTraits::gemm) against the scalar vec_dot, every tile shape
// nr × nt in 1..4 × 1..4, strided weight rows, odd block counts and tails.
// Error limit: |Δ| ≤ 1e-5 · Σ|w_i·x_i| (f32 lanes vs the reference's order), like vec_dot.
// Outputs outside the tile must stay untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/traits.h"
#include "kernels/kernel_test_data.h"

namespace strata {
namespace {

using kernel_test::abs_dot;
using kernel_test::gaussian;

const GgmlType kTypes[] = {GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4};

std::vector<int64_t> lengths(GgmlType t) {
  if (type_info(t).block_size == 32) return {32, 64, 96, 224, 1056};
  return {1, 16, 40, 100, 1024};
}

using Gemm = kernel_test::IsaTest;

TEST_P(Gemm, TilesMatchScalarVecDot) {
  int checked = 0;
  for (GgmlType t : kTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    if (k.gemm == nullptr) continue;
    const QuantRef& ref = *quant_ref(t);
    for (int64_t n : lengths(t)) {
      const size_t rb = row_bytes(t, n), ws = rb + 8;  // padded stride: rows are not contiguous
      std::vector<uint8_t> w(ws * kGemmTileRows);
      for (int r = 0; r < kGemmTileRows; ++r)
        ref.from_float(gaussian(n, static_cast<uint32_t>(n + r)).data(), w.data() + r * ws, n);
      const size_t xb = row_bytes(ref.vec_dot_type, n);
      std::vector<std::vector<uint8_t>> x(kGemmTileTokens, std::vector<uint8_t>(xb));
      for (int i = 0; i < kGemmTileTokens; ++i)
        quant_ref(ref.vec_dot_type)
            ->from_float(gaussian(n, static_cast<uint32_t>(7 * n + i + 100)).data(), x[i].data(), n);
      for (int nr = 1; nr <= kGemmTileRows; ++nr) {
        for (int nt = 1; nt <= kGemmTileTokens; ++nt) {
          std::vector<std::vector<float>> y(kGemmTileTokens, std::vector<float>(kGemmTileRows + 1, -7.0f));
          const void* xs[kGemmTileTokens];
          float* ys[kGemmTileTokens];
          for (int i = 0; i < kGemmTileTokens; ++i) xs[i] = x[i].data(), ys[i] = y[i].data();
          k.gemm(n, w.data(), ws, nr, xs, nt, ys);
          for (int i = 0; i < kGemmTileTokens; ++i) {
            for (int r = 0; r <= kGemmTileRows; ++r) {
              if (i >= nt || r >= nr) {
                ASSERT_EQ(y[i][r], -7.0f) << type_name(t) << " wrote outside the tile";
                continue;
              }
              const float want = ref.vec_dot(n, w.data() + r * ws, x[i].data());
              const double mag = abs_dot(t, w.data() + r * ws, ref.vec_dot_type, x[i].data(), n);
              ASSERT_LE(std::fabs(double(y[i][r]) - want), 1e-5 * mag + 1e-30)
                  << type_name(t) << " n=" << n << " tile " << nr << "x" << nt << " r=" << r << " t=" << i;
              ++checked;
            }
          }
        }
      }
    }
  }
  if (GetParam() == Isa::avx512) {
    EXPECT_GT(checked, 0) << "no AVX-512 tile kernels registered";
  }
}

// matmul_q through the tiles (token and row counts not multiples of the tile) equals the
// per-element vec_dot of the same ISA.
TEST_P(Gemm, MatmulTilesEqualVecDotLoop) {
  ThreadPool pool(2);
  for (GgmlType t : kTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    if (k.gemm == nullptr || kernel_traits(t).isa != GetParam()) continue;  // matmul uses the active ISA
    const int64_t in = 96, out = 37, nt = 11;
    const size_t rb = row_bytes(t, in);
    std::vector<uint8_t> w(rb * out);
    for (int64_t r = 0; r < out; ++r)
      quant_ref(t)->from_float(gaussian(in, static_cast<uint32_t>(r)).data(), w.data() + r * rb, in);
    TensorView v;
    v.name = "w";
    v.type = t;
    v.n_dims = 2;
    v.ne[0] = in;
    v.ne[1] = out;
    v.nb[0] = type_info(t).type_size;
    v.nb[1] = rb;
    v.nb[2] = v.nb[3] = rb * static_cast<size_t>(out);
    v.data = w.data();
    v.nbytes = w.size();
    std::vector<float> x(static_cast<size_t>(in * nt));
    for (int64_t i = 0; i < nt; ++i) {
      auto g = gaussian(in, static_cast<uint32_t>(500 + i));
      std::copy(g.begin(), g.end(), x.begin() + i * in);
    }
    QuantizedActs qa;
    std::vector<float> y(static_cast<size_t>(out * nt));
    ASSERT_TRUE(matmul(v, x.data(), nt, y.data(), pool, qa).ok());
    for (int64_t i = 0; i < nt; ++i) {
      for (int64_t r = 0; r < out; ++r) {
        const float want = k.vec_dot(in, w.data() + r * rb, qa.row(i));
        const double mag =
            abs_dot(t, w.data() + r * rb, k.vec_dot_type, static_cast<const uint8_t*>(qa.row(i)), in);
        ASSERT_LE(std::fabs(double(y[i * out + r]) - want), 1e-5 * mag + 1e-30) << type_name(t);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Gemm, ::testing::Values(Isa::avx2, Isa::avx512),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(isa_name(i.param));
                         });

}  // namespace
}  // namespace strata
