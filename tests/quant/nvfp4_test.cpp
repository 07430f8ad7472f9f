// NVFP4 in ggml's layout (quant/nvfp4.cpp): the block's bytes as ggml defines them (scale bytes
// first, then the nibbles, byte j of a sub-block holding elements j and j + 8), the scale bytes as
// ggml reads them (checked against the spec's formula written out here, every byte), the
// quantizer's scale search (never worse than the amax/6 code alone, better than MXFP4 on gaussian
// rows, MXFP4's values exactly), odd input (zeros, NaN, ±inf, huge and tiny blocks) and the reference dot
// product.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "quant/fp8_fp4.h"
#include "quant/quant_ref.h"
#include "quant/weight_quant.h"

namespace strata {
namespace {

std::vector<float> gaussian_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(row_bytes(t, n));
  quant_ref(t)->from_float(x.data(), q.data(), n);
  std::vector<float> y(x.size());
  quant_ref(t)->to_float(q.data(), y.data(), n);
  return y;
}

double rel_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double e2 = 0, x2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e2 += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    x2 += double(x[i]) * x[i];
  }
  return std::sqrt(e2 / x2);
}

TEST(Nvfp4, TypeInfo) {
  const TypeInfo& ti = type_info(40);
  EXPECT_TRUE(ti.known);
  EXPECT_STREQ(ti.name, "nvfp4");
  EXPECT_EQ(ti.block_size, 64);
  EXPECT_EQ(ti.type_size, 36u);
  EXPECT_TRUE(type_supported(GgmlType::nvfp4));
  GgmlType t{};
  ASSERT_TRUE(type_from_name("NVFP4", &t));
  EXPECT_EQ(t, GgmlType::nvfp4);
  EXPECT_EQ(quant_ref(GgmlType::nvfp4)->vec_dot_type, GgmlType::q8_0);
  EXPECT_EQ(offsetof(BlockNvfp4, qs), 4u);
  EXPECT_NE(weight_quantizer(GgmlType::nvfp4), nullptr);
}

// ggml's reading of a scale byte, from the format's definition: exponent bits 3-6 (bias 7),
// mantissa bits 0-2, subnormal for exponent 0, 0x7f reads 0, bit 7 is not a sign.
double spec_scale(uint8_t b) {
  if (b == 0x7f || b == 0) return 0.0;
  const int e = (b >> 3) & 0xf, m = b & 7;
  return e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, e - 7);
}

TEST(Nvfp4, EveryScaleByteReadsAsGgmlReadsIt) {
  for (int b = 0; b < 256; ++b) {
    const uint8_t u = static_cast<uint8_t>(b);
    EXPECT_EQ(double(nvfp4_scale_to_f32(u)), spec_scale(u)) << "byte " << b;
    EXPECT_EQ(2.0f * kNvfp4ScaleHalf[u], nvfp4_scale_to_f32(u));
    // Where UE4M3 has a value (not 0x7f), it is the same value.
    if ((b & 0x7f) != 0x7f) {
      EXPECT_EQ(nvfp4_scale_to_f32(u), ue4m3_to_f32(u)) << "byte " << b;
    }
  }
  EXPECT_EQ(nvfp4_scale_to_f32(0xff), 480.0f);
  EXPECT_EQ(nvfp4_scale_to_f32(0x7e), 448.0f);
  EXPECT_EQ(nvfp4_scale_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(Nvfp4, HandBuiltBlockLayout) {
  BlockNvfp4 b{};
  b.d[0] = 0x38;  // 1.0
  b.d[1] = 0x40;  // 2.0
  b.d[2] = 0x30;  // 0.5
  b.d[3] = 0x7f;  // reads 0
  for (int s = 0; s < 4; ++s)
    for (int j = 0; j < 8; ++j) b.qs[8 * s + j] = static_cast<uint8_t>(j | ((j + 8) << 4));  // +v_j, -v_j
  float y[64];
  to_float_nvfp4(&b, y, 64);
  const float scales[4] = {1.0f, 2.0f, 0.5f, 0.0f};
  for (int s = 0; s < 4; ++s)
    for (int j = 0; j < 8; ++j) {
      const float v = e2m1_to_f32(static_cast<uint8_t>(j));
      EXPECT_EQ(y[16 * s + j], v * scales[s]) << s << " " << j;
      EXPECT_EQ(y[16 * s + j + 8], -v * scales[s]) << s << " " << j;
    }
}

TEST(Nvfp4, ExactValuesRoundTripExactly) {
  // Every E2M1 value times a per-sub-block power of two (MXFP4's values at finer grain) and times
  // a UE4M3 scale with mantissa bits: the search finds a scale that holds them exactly.
  std::vector<float> x(128);
  const float scales[8] = {1.0f, 0.25f, 3.0f, 1.125f, 1.0f / 512, 96.0f, 0.0f, 7.5f};
  for (int i = 0; i < 128; ++i) {
    const float v = e2m1_to_f32(static_cast<uint8_t>(i % 16 == 8 ? 7 : i % 16));  // 6 in every sub-block
    x[static_cast<size_t>(i)] = v * scales[i / 16];
  }
  const auto y = round_trip(GgmlType::nvfp4, x);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)]) << i;
}

// MXFP4 blocks (random nibbles, exponents whose 2^(e-127) UE4M3 holds: 2^-9..2^8) convert to
// NVFP4 and back without loss: the bundled model's experts keep their values.
TEST(Nvfp4, Mxfp4ValuesConvertExactly) {
  const int64_t n = 64 * 64;
  std::mt19937 rng(3);
  std::vector<BlockMxfp4> m(static_cast<size_t>(n / QK_MXFP4));
  for (auto& b : m) {
    b.e = static_cast<uint8_t>(127 - 9 + static_cast<int>(rng() % 18));
    for (auto& q : b.qs) q = static_cast<uint8_t>(rng());
  }
  std::vector<float> x(static_cast<size_t>(n));
  to_float_mxfp4(m.data(), x.data(), n);
  const auto y = round_trip(GgmlType::nvfp4, x);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)]) << i;
}

// NVFP4's own values are a fixed point of the quantizer (requantizing loses nothing).
TEST(Nvfp4, RequantizingKeepsTheValues) {
  const auto x = round_trip(GgmlType::nvfp4, gaussian_row(64 * 64, 9));
  const auto y = round_trip(GgmlType::nvfp4, x);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << i;
}

TEST(Nvfp4, ScaleSearchBeatsAmaxOverSixAndMxfp4) {
  const int64_t n = 64 * 256;
  const auto x = gaussian_row(n, 5);
  std::vector<uint8_t> q(row_bytes(GgmlType::nvfp4, n));
  from_float_nvfp4(x.data(), q.data(), n);
  // Per sub-block, the searched scale's error is at most that of the amax/6 code.
  const BlockNvfp4* b = reinterpret_cast<const BlockNvfp4*>(q.data());
  std::vector<float> y(static_cast<size_t>(n));
  to_float_nvfp4(q.data(), y.data(), n);
  int improved = 0;
  for (int64_t g = 0; g < n / 16; ++g) {
    const float* xs = x.data() + g * 16;
    float amax = 0;
    for (int j = 0; j < 16; ++j) amax = std::fmax(amax, std::fabs(xs[j]));
    const float s0 = ue4m3_to_f32(f32_to_ue4m3(amax / 6.0f));
    double e0 = 0, e = 0;
    for (int j = 0; j < 16; ++j) {
      const double d0 = xs[j] - s0 * e2m1_round(xs[j] / s0), d = xs[j] - y[static_cast<size_t>(g * 16 + j)];
      e0 += d0 * d0;
      e += d * d;
    }
    EXPECT_LE(e, e0 * (1 + 1e-6)) << "sub-block " << g;
    if (b[g / 4].d[g % 4] != f32_to_ue4m3(amax / 6.0f)) ++improved;
  }
  EXPECT_GT(improved, 0);
  const double nv = rel_rms(x, y), mx = rel_rms(x, round_trip(GgmlType::mxfp4, x));
  EXPECT_LT(nv, 0.1);
  EXPECT_LT(nv, 0.8 * mx) << "nvfp4 " << nv << " mxfp4 " << mx;
}

TEST(Nvfp4, OddInputStaysFinite) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(64 * 4, 0.0f);                                                  // block 0: zeros
  for (int i = 64; i < 128; ++i) x[static_cast<size_t>(i)] = (i % 2 ? 1e30f : -3.0f);  // huge
  for (int i = 128; i < 192; ++i) x[static_cast<size_t>(i)] = 1e-30f * float(i);       // below every scale
  x[192] = nan;
  x[193] = inf;
  x[200] = -inf;
  x[210] = 1.0f;
  std::vector<uint8_t> q(row_bytes(GgmlType::nvfp4, 256));
  from_float_nvfp4(x.data(), q.data(), 256);
  const BlockNvfp4* b = reinterpret_cast<const BlockNvfp4*>(q.data());
  for (int s = 0; s < 4; ++s) EXPECT_EQ(b[0].d[s], 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(b[0].qs[i], 0);
  std::vector<float> y(256);
  to_float_nvfp4(q.data(), y.data(), 256);
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(y[65], 6.0f * 448.0f);  // saturated
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], 0.0f);
}

// The reference dot equals a double dot of the dequantized operands up to f32 rounding.
TEST(Nvfp4, VecDotMatchesDequantizedDot) {
  for (int64_t n : {64, 448, 4096}) {
    const auto w = gaussian_row(n, 31), x = gaussian_row(n, 32);
    std::vector<uint8_t> wq(row_bytes(GgmlType::nvfp4, n)), xq(row_bytes(GgmlType::q8_0, n));
    from_float_nvfp4(w.data(), wq.data(), n);
    from_float_q8_0(x.data(), xq.data(), n);
    std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
    to_float_nvfp4(wq.data(), wd.data(), n);
    to_float_q8_0(xq.data(), xd.data(), n);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += double(wd[static_cast<size_t>(i)]) * xd[static_cast<size_t>(i)];
      mag += std::fabs(double(wd[static_cast<size_t>(i)]) * xd[static_cast<size_t>(i)]);
    }
    EXPECT_NEAR(vec_dot_nvfp4_q8_0(n, wq.data(), xq.data()), ref, 1e-6 * mag) << n;
  }
}

}  // namespace
}  // namespace strata
