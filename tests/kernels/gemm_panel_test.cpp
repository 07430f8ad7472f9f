// Many-token panel kernels (KernelTraits::gemm_panel) against the scalar vec_dot: row counts
// around the 16-row panel, token counts around the 8-token register tile, lengths around the
// 1024-element K chunk, strided weight rows. Error limit as for the tiles: |Δ| ≤ 1e-5·Σ|w_i·x_i|.
// An element's value must not depend on which rows and tokens share the call (bit-identical to
// a one-row, one-token call), and nothing outside [nr) × [nt) may be written.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/traits.h"
#include "kernels/kernel_test_data.h"

namespace strata {
namespace {

using kernel_test::abs_dot;
using kernel_test::gaussian;

const GgmlType kTypes[] = {GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4, GgmlType::f16, GgmlType::bf16};

struct Case {
  int64_t n, nr;
  int nt;
};

TEST(GemmPanel, MatchesScalarVecDot) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "CPU lacks avx512";
  const Case cases[] = {{32, 1, 1},    {64, 5, 2},     {96, 16, 8},   {224, 17, 9},  {1056, 37, 13},
                        {2080, 16, 3}, {1024, 64, 64}, {512, 33, 31}, {3104, 7, 17}, {160, 48, 16}};
  int checked = 0;
  for (GgmlType t : kTypes) {
    const KernelTraits& k = kernel_traits(t, Isa::avx512);
    if (k.gemm_panel == nullptr) continue;
    const QuantRef& ref = *quant_ref(t);
    const QuantRef& xref = *quant_ref(ref.vec_dot_type);
    for (const Case& c : cases) {
      const size_t rb = row_bytes(t, c.n), ws = rb + 8;  // padded stride: rows are not contiguous
      std::vector<uint8_t> w(ws * static_cast<size_t>(c.nr));
      for (int64_t r = 0; r < c.nr; ++r)
        ref.from_float(gaussian(c.n, static_cast<uint32_t>(c.n + r)).data(), w.data() + r * ws, c.n);
      const size_t xb = row_bytes(ref.vec_dot_type, c.n);
      std::vector<std::vector<uint8_t>> x(static_cast<size_t>(c.nt), std::vector<uint8_t>(xb));
      for (int i = 0; i < c.nt; ++i)
        xref.from_float(gaussian(c.n, static_cast<uint32_t>(7 * c.n + i + 100)).data(), x[i].data(), c.n);
      std::vector<std::vector<float>> y(static_cast<size_t>(c.nt), std::vector<float>(c.nr + 1, -7.0f));
      std::vector<const void*> xs(static_cast<size_t>(c.nt));
      std::vector<float*> ys(static_cast<size_t>(c.nt));
      for (int i = 0; i < c.nt; ++i) xs[i] = x[i].data(), ys[i] = y[i].data();
      k.gemm_panel(c.n, w.data(), ws, c.nr, xs.data(), c.nt, ys.data());
      for (int i = 0; i < c.nt; ++i) {
        ASSERT_EQ(y[i][c.nr], -7.0f) << type_name(t) << " wrote past row " << c.nr;
        for (int64_t r = 0; r < c.nr; ++r) {
          const float want = ref.vec_dot(c.n, w.data() + r * ws, x[i].data());
          const double mag = abs_dot(t, w.data() + r * ws, ref.vec_dot_type, x[i].data(), c.n);
          ASSERT_LE(std::fabs(double(y[i][r]) - want), 1e-5 * mag + 1e-30)
              << type_name(t) << " n=" << c.n << " nr=" << c.nr << " nt=" << c.nt << " r=" << r << " t=" << i;
          ++checked;
        }
      }
      // The same element from a call with only that row and token: bit-identical.
      for (int i = 0; i < c.nt; i += 5) {
        for (int64_t r = 0; r < c.nr; r += 7) {
          float one = -7.0f;
          float* yo = &one;
          const void* xo = x[i].data();
          k.gemm_panel(c.n, w.data() + r * ws, ws, 1, &xo, 1, &yo);
          ASSERT_EQ(one, y[i][r]) << type_name(t) << " n=" << c.n << " r=" << r << " t=" << i
                                  << ": result depends on the call's shape";
        }
      }
    }
  }
  EXPECT_GT(checked, 0) << "no AVX-512 panel kernels registered";
}

// Decode (gemv) and prefill (panel) of F16 weights give the same bits on AVX-512, also past the
// panel's 1024-element K chunk (the gemv summed 2048-element segments until they were aligned),
// with a last chunk of n % 16 != 0, and past the gemv's 8192-element activation pass.
TEST(GemmPanel, F16PanelEqualsGemvBits) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "CPU lacks avx512";
  const KernelTraits& k = kernel_traits(GgmlType::f16, Isa::avx512);
  ASSERT_NE(k.gemm_panel, nullptr);
  ASSERT_NE(k.gemv, nullptr);
  const QuantRef& ref = *quant_ref(GgmlType::f16);
  for (int64_t n : {512, 1024, 1040, 2048, 3000, 3001, 4096, 8192 + 1024 + 9}) {
    const int64_t nr = 9;
    const size_t rb = row_bytes(GgmlType::f16, n);
    std::vector<uint8_t> w(rb * nr), x(rb);
    for (int64_t r = 0; r < nr; ++r)
      ref.from_float(gaussian(n, static_cast<uint32_t>(n + r)).data(), w.data() + r * rb, n);
    ref.from_float(gaussian(n, static_cast<uint32_t>(3 * n)).data(), x.data(), n);
    std::vector<float> g(nr), p(nr);
    k.gemv(n, w.data(), rb, nr, x.data(), g.data());
    const void* xp = x.data();
    float* yp = p.data();
    k.gemm_panel(n, w.data(), rb, nr, &xp, 1, &yp);
    for (int64_t r = 0; r < nr; ++r) EXPECT_EQ(g[r], p[r]) << "n=" << n << " r=" << r;
  }
}

}  // namespace
}  // namespace strata
