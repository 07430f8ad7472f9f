// The AVX2 many-token panels (KernelTraits::gemm_panel at Isa::avx2: Q8_0, Q4_0, MXFP4 against
// Q8_0) against the scalar vec_dot. Weight blocks are raw random bytes (every quant byte and
// nibble, −128 included; scales random finite halves, E8M0 exponents 0..2 (subnormal scales) and
// 100..149); activations alternately the Q8_0 quantizer's output of Gaussian rows and raw random
// Q8_0 blocks (−128 included, which the quantizer never writes: the panels are exact for it).
// Row counts around the 8-row panel, every token count 1..64 (the 6- and 4-token tiles and their
// remainders), lengths up to 4096 around the K chunks (8 and 16 blocks), padded row strides.
// Error limit as for the other tiles and panels: |Δ| ≤ 1e-5·Σ|w_i·x_i|. An element must not
// depend on which rows and tokens share the call (bit-identical to a one-row, one-token call),
// nothing outside [nr) × [nt) may be written, and where the CPU has AVX-512 the AVX2 panel must
// give the AVX-512 panel's bits (same per-element arithmetic). Extreme operands (every weight at
// its largest or smallest code, every activation 127 or −128) reach the int16 sums' bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

const GgmlType kTypes[] = {GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4};

// nr rows of n elements, ws bytes apart, of raw random blocks with sane scales.
std::vector<uint8_t> random_rows(GgmlType t, int64_t n, int64_t nr, size_t ws, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(ws * static_cast<size_t>(nr));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const int64_t nb = n / 32;
  std::uniform_real_distribution<float> mag(-2.0f, 2.0f);
  for (int64_t r = 0; r < nr; ++r) {
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* blk = w.data() + static_cast<size_t>(r) * ws;
      if (t == GgmlType::mxfp4) {
        auto* b = reinterpret_cast<BlockMxfp4*>(blk) + i;
        const uint32_t k = rng() % 16;
        b->e = static_cast<uint8_t>(k == 0 ? rng() % 3 : 100 + rng() % 50);  // subnormal scales too
      } else {
        // Finite halves over several binades, a zero now and then.
        const float d = rng() % 17 == 0 ? 0.0f : std::ldexp(mag(rng), static_cast<int>(rng() % 12) - 8);
        const uint16_t h = f32_to_fp16(d);
        if (t == GgmlType::q8_0)
          reinterpret_cast<BlockQ8_0*>(blk)[i].d = h;
        else
          reinterpret_cast<BlockQ4_0*>(blk)[i].d = h;
      }
    }
  }
  return w;
}

struct Case {
  int64_t n, nr;
};

TEST(GemmPanelAvx2, MatchesScalarVecDot) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "CPU lacks avx2";
  const Case cases[] = {{32, 1},  {64, 7},    {256, 8},  {288, 9},   {512, 13},
                        {544, 3}, {1056, 17}, {2080, 5}, {4096, 11}, {4064, 24}};
  const bool cross = isa_supported(Isa::avx512);
  int checked = 0, crossed = 0;
  for (GgmlType t : kTypes) {
    const KernelTraits& k = kernel_traits(t, Isa::avx2);
    ASSERT_NE(k.gemm_panel, nullptr) << type_name(t) << ": no AVX2 panel registered";
    const KernelTraits& k512 = kernel_traits(t, Isa::avx512);
    const QuantRef& ref = *quant_ref(t);
    const QuantRef& xref = *quant_ref(ref.vec_dot_type);
    for (const Case& c : cases) {
      const size_t rb = row_bytes(t, c.n), ws = rb + 6;  // padded, unaligned stride
      const std::vector<uint8_t> w = random_rows(t, c.n, c.nr, ws, static_cast<uint32_t>(c.n * 31 + c.nr));
      const size_t xb = row_bytes(ref.vec_dot_type, c.n);
      std::vector<std::vector<uint8_t>> x(kGemmPanelTokens, std::vector<uint8_t>(xb));
      for (int i = 0; i < kGemmPanelTokens; ++i) {
        if (i % 2 == 0)
          xref.from_float(gaussian(c.n, static_cast<uint32_t>(7 * c.n + i + 100)).data(), x[i].data(), c.n);
        else
          x[i] = random_rows(GgmlType::q8_0, c.n, 1, xb, static_cast<uint32_t>(5 * c.n + i));
      }
      std::vector<std::vector<float>> want(kGemmPanelTokens, std::vector<float>(c.nr));
      std::vector<std::vector<double>> mag(kGemmPanelTokens, std::vector<double>(c.nr));
      for (int i = 0; i < kGemmPanelTokens; ++i)
        for (int64_t r = 0; r < c.nr; ++r) {
          want[i][r] = ref.vec_dot(c.n, w.data() + r * ws, x[i].data());
          mag[i][r] = abs_dot(t, w.data() + r * ws, ref.vec_dot_type, x[i].data(), c.n);
        }
      for (int nt = 1; nt <= kGemmPanelTokens; ++nt) {
        std::vector<std::vector<float>> y(kGemmPanelTokens, std::vector<float>(c.nr + 1, -7.0f));
        std::vector<const void*> xs(static_cast<size_t>(nt));
        std::vector<float*> ys(static_cast<size_t>(nt));
        for (int i = 0; i < nt; ++i) xs[i] = x[i].data(), ys[i] = y[i].data();
        k.gemm_panel(c.n, w.data(), ws, c.nr, xs.data(), nt, ys.data());
        for (int i = 0; i < kGemmPanelTokens; ++i) {
          ASSERT_EQ(y[i][c.nr], -7.0f) << type_name(t) << " nt=" << nt << " wrote past row " << c.nr;
          if (i >= nt) {
            ASSERT_EQ(y[i][0], -7.0f) << type_name(t) << " nt=" << nt << " wrote token " << i;
            continue;
          }
          for (int64_t r = 0; r < c.nr; ++r) {
            ASSERT_LE(std::fabs(double(y[i][r]) - want[i][r]), 1e-5 * mag[i][r] + 1e-30)
                << type_name(t) << " n=" << c.n << " nr=" << c.nr << " nt=" << nt << " r=" << r << " t=" << i
                << " got " << y[i][r] << " want " << want[i][r];
            ++checked;
          }
        }
        // The same element from a call with only that row and token: bit-identical.
        if (nt % 13 == 0 || nt == kGemmPanelTokens) {
          for (int i = 0; i < nt; i += 5) {
            for (int64_t r = 0; r < c.nr; r += 3) {
              float one = -7.0f;
              float* yo = &one;
              const void* xo = x[i].data();
              k.gemm_panel(c.n, w.data() + r * ws, ws, 1, &xo, 1, &yo);
              ASSERT_EQ(one, y[i][r]) << type_name(t) << " n=" << c.n << " r=" << r << " t=" << i
                                      << ": result depends on the call's shape";
            }
          }
        }
        // The AVX-512 panel's bits, where the CPU can run it.
        if (cross && k512.gemm_panel != nullptr && nt % 9 == 1) {
          std::vector<std::vector<float>> z(static_cast<size_t>(nt), std::vector<float>(c.nr));
          std::vector<float*> zs(static_cast<size_t>(nt));
          for (int i = 0; i < nt; ++i) zs[i] = z[i].data();
          k512.gemm_panel(c.n, w.data(), ws, c.nr, xs.data(), nt, zs.data());
          for (int i = 0; i < nt; ++i)
            for (int64_t r = 0; r < c.nr; ++r) {
              ASSERT_EQ(z[i][r], y[i][r]) << type_name(t) << " n=" << c.n << " r=" << r << " t=" << i
                                          << ": AVX2 and AVX-512 panels differ";
              ++crossed;
            }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
  if (cross) {
    EXPECT_GT(crossed, 0);
  }
}

// Every weight code at one extreme against every activation byte at one extreme: the int16 pair
// sums of the nibble types reach their bounds (Q4_0: 8 dwords · 2 · 15 · 128 = 30720 < 32768),
// Q8_0's int16 products 2 · 128 · 128. Scales 1 (2^0 for MXFP4: e = 128), so sums are exact.
TEST(GemmPanelAvx2, ExtremeOperandsAreExact) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "CPU lacks avx2";
  const int64_t n = 1024, nr = 9;
  const int nt = 7;
  for (GgmlType t : kTypes) {
    const KernelTraits& k = kernel_traits(t, Isa::avx2);
    ASSERT_NE(k.gemm_panel, nullptr);
    const QuantRef& ref = *quant_ref(t);
    const size_t rb = row_bytes(t, n), xb = row_bytes(GgmlType::q8_0, n);
    for (const uint8_t wcode : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x77}, uint8_t{0x80}}) {
      for (const int8_t xv : {int8_t{127}, int8_t{-128}}) {
        std::vector<uint8_t> w(rb * nr, wcode), x(xb);
        for (int64_t i = 0; i < n / 32; ++i) {
          auto& xbk = reinterpret_cast<BlockQ8_0*>(x.data())[i];
          xbk.d = f32_to_fp16(1.0f);
          for (auto& q : xbk.qs) q = xv;
          for (int64_t r = 0; r < nr; ++r) {
            uint8_t* blk = w.data() + r * rb;
            if (t == GgmlType::mxfp4)
              reinterpret_cast<BlockMxfp4*>(blk)[i].e = 128;
            else if (t == GgmlType::q8_0)
              reinterpret_cast<BlockQ8_0*>(blk)[i].d = f32_to_fp16(1.0f);
            else
              reinterpret_cast<BlockQ4_0*>(blk)[i].d = f32_to_fp16(1.0f);
          }
        }
        std::vector<std::vector<float>> y(nt, std::vector<float>(nr));
        std::vector<const void*> xs(nt, x.data());
        std::vector<float*> ys(nt);
        for (int i = 0; i < nt; ++i) ys[i] = y[i].data();
        k.gemm_panel(n, w.data(), rb, nr, xs.data(), nt, ys.data());
        const float want = ref.vec_dot(n, w.data(), x.data());
        for (int i = 0; i < nt; ++i)
          for (int64_t r = 0; r < nr; ++r)
            ASSERT_EQ(y[i][r], want) << type_name(t) << " code 0x" << std::hex << int(wcode) << std::dec
                                     << " x " << int(xv) << " r=" << r << " t=" << i;
      }
    }
  }
}

}  // namespace
}  // namespace strata
