// Scalar reference per type: hand-built blocks (layout, nibble order, scale packing), known
// rounding cases, round-trip error bounds, and reference dot products vs a double dot of the
// dequantized rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "quant/q4_k_scales.h"
#include "quant/quant_ref.h"

namespace strata {
namespace {

std::vector<float> random_row(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

std::vector<uint8_t> quantize(GgmlType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  quant_ref(t)->from_float(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(GgmlType t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  quant_ref(t)->to_float(q.data(), y.data(), n);
  return y;
}

TEST(QuantRef, TableCoversSupportedTypes) {
  for (GgmlType t : {GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0,
                     GgmlType::mxfp4, GgmlType::q4_k, GgmlType::q6_k, GgmlType::q8_k}) {
    const QuantRef* r = quant_ref(t);
    ASSERT_NE(r, nullptr) << type_name(t);
    EXPECT_TRUE(type_supported(t)) << type_name(t);
    EXPECT_NE(r->to_float, nullptr);
    EXPECT_NE(r->from_float, nullptr);
    if (t != GgmlType::q8_k) {
      EXPECT_NE(r->vec_dot, nullptr) << type_name(t);
    }
  }
  EXPECT_EQ(quant_ref(GgmlType::q4_1), nullptr);
  EXPECT_EQ(quant_ref(GgmlType::iq4_nl)->vec_dot_type, GgmlType::q8_0);  // a KV type (kv/kv_type.h)
  EXPECT_EQ(quant_ref(GgmlType::q4_0)->vec_dot_type, GgmlType::q8_0);
  EXPECT_EQ(quant_ref(GgmlType::mxfp4)->vec_dot_type, GgmlType::q8_0);
  EXPECT_EQ(quant_ref(GgmlType::q4_k)->vec_dot_type, GgmlType::q8_k);
  EXPECT_EQ(quant_ref(GgmlType::q6_k)->vec_dot_type, GgmlType::q8_k);
  EXPECT_EQ(quant_ref(GgmlType::f16)->vec_dot_type, GgmlType::f16);
}

TEST(QuantRef, FloatTypesRoundTrip) {
  const std::vector<float> exact = {
      0.0f, -0.0f, 1.0f, -2.5f, 0.125f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f};
  auto h = quantize(GgmlType::f16, exact);
  auto back = dequantize(GgmlType::f16, h, static_cast<int64_t>(exact.size()));
  for (size_t i = 0; i < exact.size(); ++i) EXPECT_EQ(f32_bits(back[i]), f32_bits(exact[i])) << i;
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: nearest even keeps 1.
  std::vector<float> tie = {1.0f + 0.00048828125f, 1.0f + 3 * 0.00048828125f};
  auto ht = quantize(GgmlType::f16, tie);
  EXPECT_EQ(dequantize(GgmlType::f16, ht, 2)[0], 1.0f);
  EXPECT_EQ(dequantize(GgmlType::f16, ht, 2)[1], 1.0f + 4 * 0.00048828125f);
  // bf16 keeps the f32 exponent: 3.0e38 survives, 1 + 2^-8 (a tie) rounds to 1.
  std::vector<float> b = {3.0e38f, 1.0f + 0.00390625f, -1.5f};
  auto bb = dequantize(GgmlType::bf16, quantize(GgmlType::bf16, b), 3);
  EXPECT_NEAR(bb[0], 3.0e38f, 3.0e38f / 128);
  EXPECT_EQ(bb[1], 1.0f);
  EXPECT_EQ(bb[2], -1.5f);
}

TEST(QuantRef, Q8_0KnownBlockAndTies) {
  // amax = 127 → d = 1, id = 1: x·id is x itself, so halves show the rounding rule.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;   // tie → 2 (half to even)
  x[2] = 3.5f;   // tie → 4
  x[3] = -2.5f;  // tie → −2
  x[4] = -0.4f;
  x[5] = 0.6f;
  x[6] = -127.0f;
  auto q = quantize(GgmlType::q8_0, x);
  BlockQ8_0 b;
  std::memcpy(&b, q.data(), sizeof(b));
  EXPECT_EQ(b.d, f32_to_fp16(1.0f));
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], 4);
  EXPECT_EQ(b.qs[3], -2);
  EXPECT_EQ(b.qs[4], 0);
  EXPECT_EQ(b.qs[5], 1);
  EXPECT_EQ(b.qs[6], -127);
  // All-zero block: d = 0, q = 0.
  auto z = quantize(GgmlType::q8_0, std::vector<float>(32, 0.0f));
  for (uint8_t c : z) EXPECT_EQ(c, 0);
}

TEST(QuantRef, Q4_0HandBuiltBlockNibbleOrder) {
  BlockQ4_0 b;
  b.d = f32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  to_float_q4_0(&b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 8)) << j;            // low nibble: element j
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(7 - j)) << j + 16;  // high nibble: element j+16
  }
  // from_float: largest-magnitude value maps to −8, so the grid round-trips exactly.
  std::vector<float> grid(32);
  for (int j = 0; j < 32; ++j) grid[j] = static_cast<float>((j % 16) - 8) * -0.25f;
  grid[5] = 2.0f;  // = −8 · −0.25
  auto back = dequantize(GgmlType::q4_0, quantize(GgmlType::q4_0, grid), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(back[j], grid[j]) << j;
}

TEST(QuantRef, Iq4NlHandBuiltBlockAndGrid) {
  BlockIq4Nl b;
  b.d = f32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  to_float_iq4_nl(&b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * kIq4NlValues[j]) << j;
    EXPECT_EQ(y[j + 16], 0.5f * kIq4NlValues[15 - j]) << j + 16;
  }
  // Values on the grid (its extremes present) come back exactly; a zero block is zeros.
  std::vector<float> grid(32);
  for (int j = 0; j < 32; ++j) grid[j] = 0.25f * kIq4NlValues[(j * 7) % 16];
  auto back = dequantize(GgmlType::iq4_nl, quantize(GgmlType::iq4_nl, grid), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(back[j], grid[j]) << j;
  back = dequantize(GgmlType::iq4_nl, quantize(GgmlType::iq4_nl, std::vector<float>(32, 0.0f)), 32);
  for (float v : back) EXPECT_EQ(v, 0.0f);
}

// On gaussian values (attention's rotated K / V) the non-linear grid beats Q4_0's uniform one.
TEST(QuantRef, Iq4NlErrorBelowQ4_0) {
  const int64_t n = 4096;
  const auto x = random_row(n, 5);
  double e[2] = {0, 0};
  const GgmlType ts[2] = {GgmlType::iq4_nl, GgmlType::q4_0};
  for (int k = 0; k < 2; ++k) {
    const auto y = dequantize(ts[k], quantize(ts[k], x), n);
    for (int64_t i = 0; i < n; ++i) e[k] += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
  }
  EXPECT_LT(e[0], 0.9 * e[1]);
}

TEST(QuantRef, Mxfp4HandBuiltBlock) {
  static const float kE2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  BlockMxfp4 b;
  b.e = 127;  // 2^0
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  to_float_mxfp4(&b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], kE2M1[j]) << j;
    EXPECT_EQ(y[j + 16], kE2M1[15 - j]) << j + 16;
  }
  b.e = 130;  // 2^3
  to_float_mxfp4(&b, y, 32);
  EXPECT_EQ(y[7], 48.0f);
  EXPECT_EQ(y[16], -48.0f);
  EXPECT_EQ(e8m0_to_f32_half(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(e8m0_to_f32_half(1), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_to_f32_half(254), std::ldexp(1.0f, 126));
  // Values on the grid round-trip exactly.
  std::vector<float> grid(32);
  for (int j = 0; j < 32; ++j) grid[j] = kE2M1[(j * 7) % 16] * 0.25f;
  grid[0] = 6.0f * 0.25f;
  auto back = dequantize(GgmlType::mxfp4, quantize(GgmlType::mxfp4, grid), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(back[j], grid[j]) << j;
}

TEST(QuantRef, Q8_KSignedMaxAndBsums) {
  std::vector<float> x = random_row(512, 7);
  x[3] = -9.0f;   // first element of largest |x|: iscale = −127/max, so it maps to −127
  x[100] = 9.0f;  // same magnitude, other sign, later: +127
  auto q = quantize(GgmlType::q8_k, x);
  BlockQ8_K b;
  std::memcpy(&b, q.data(), sizeof(b));
  EXPECT_EQ(b.qs[3], -127);
  EXPECT_EQ(b.qs[100], 127);
  EXPECT_FLOAT_EQ(b.d, 9.0f / 127.0f);
  for (int j = 0; j < 16; ++j) {
    int s = 0;
    for (int k = 0; k < 16; ++k) s += b.qs[16 * j + k];
    EXPECT_EQ(b.bsums[j], s);
  }
  auto y = dequantize(GgmlType::q8_k, q, 512);
  for (int i = 0; i < 512; ++i) {
    BlockQ8_K bi;
    std::memcpy(&bi, q.data() + (i / 256) * sizeof(BlockQ8_K), sizeof(bi));
    EXPECT_NEAR(y[i], x[i], 0.5f * std::fabs(bi.d) * 1.001f) << i;
  }
}

TEST(QuantRef, Q4_KScaleMinPacking) {
  // Every (scale, min) pair of every sub-block survives the 12-byte packing.
  for (int j = 0; j < 8; ++j) {
    for (int v = 0; v < 64; ++v) {
      std::vector<float> x(256, 0.0f);
      BlockQ4_K b{};
      // Pack by hand as the writer does, then read back with q4_k_scale_min.
      uint8_t ls[8], lm[8];
      for (int k = 0; k < 8; ++k) {
        ls[k] = static_cast<uint8_t>((v + 5 * k) % 64);
        lm[k] = static_cast<uint8_t>((63 - v + 3 * k) % 64);
      }
      for (int k = 0; k < 8; ++k) {
        if (k < 4) {
          b.scales[k] |= ls[k];
          b.scales[k + 4] |= lm[k];
        } else {
          b.scales[k + 4] = static_cast<uint8_t>((ls[k] & 15) | ((lm[k] & 15) << 4));
          b.scales[k - 4] |= static_cast<uint8_t>((ls[k] >> 4) << 6);
          b.scales[k] |= static_cast<uint8_t>((lm[k] >> 4) << 6);
        }
      }
      uint8_t sc, m;
      q4_k_scale_min(b.scales, j, &sc, &m);
      ASSERT_EQ(sc, ls[j]) << j << " " << v;
      ASSERT_EQ(m, lm[j]) << j << " " << v;
    }
  }
}

TEST(QuantRef, Q4_KInlineUnpackMatchesReference) {
  std::mt19937 rng(3);
  for (int rep = 0; rep < 1000; ++rep) {
    uint8_t s[12], sc[8], m[8];
    for (auto& c : s) c = static_cast<uint8_t>(rng());
    q4_k_unpack_scales(s, sc, m);
    for (int j = 0; j < 8; ++j) {
      uint8_t a, b;
      q4_k_scale_min(s, j, &a, &b);
      ASSERT_EQ(sc[j], a);
      ASSERT_EQ(m[j], b);
    }
  }
}

// Round trip within the grid step of each type (relative to the row's spread).
TEST(QuantRef, RoundTripErrorBounds) {
  struct Case {
    GgmlType t;
    double max_rel_rms;
  };
  for (Case c : {Case{GgmlType::q8_0, 0.006}, Case{GgmlType::q4_0, 0.12}, Case{GgmlType::iq4_nl, 0.12},
                 Case{GgmlType::mxfp4, 0.2}, Case{GgmlType::q8_k, 0.01}, Case{GgmlType::q4_k, 0.12},
                 Case{GgmlType::q6_k, 0.04}, Case{GgmlType::f16, 0.001}, Case{GgmlType::bf16, 0.005}}) {
    const int64_t n = 1024;
    auto x = random_row(n, 11);
    auto y = dequantize(c.t, quantize(c.t, x), n);
    double e2 = 0, x2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      e2 += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
      x2 += double(x[i]) * x[i];
    }
    EXPECT_LT(std::sqrt(e2 / x2), c.max_rel_rms) << type_name(c.t);
  }
}

// Reference dot = double dot of the dequantized operands, up to f32 rounding of the block sums.
TEST(QuantRef, VecDotMatchesDequantizedDot) {
  for (GgmlType t : {GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0,
                     GgmlType::iq4_nl, GgmlType::mxfp4, GgmlType::q4_k, GgmlType::q6_k}) {
    const QuantRef* r = quant_ref(t);
    for (int64_t n : {256, 768, 4096}) {
      auto w = random_row(n, 21);
      auto x = random_row(n, 22);
      auto wq = quantize(t, w);
      auto xq = quantize(r->vec_dot_type, x);
      auto wd = dequantize(t, wq, n);
      auto xd = dequantize(r->vec_dot_type, xq, n);
      double ref = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        ref += double(wd[i]) * xd[i];
        mag += std::fabs(double(wd[i]) * xd[i]);
      }
      const float got = r->vec_dot(n, wq.data(), xq.data());
      EXPECT_NEAR(got, ref, 1e-6 * mag + 1e-30) << type_name(t) << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace strata
