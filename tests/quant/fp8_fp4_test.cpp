// The FP8 / FP4 element codecs (quant/fp8_fp4.h) against the formats' definitions, computed here
// independently in double: every E4M3 / UE4M3 / UE8M0 byte and E2M1 nibble decodes to its value,
// and rounding f32 -> E4M3 / E2M1 picks the nearest value, ties to the even code, saturating.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "quant/fp8_fp4.h"

namespace strata {
namespace {

// Sign, exponent bits (bias), mantissa bits: (1 + m / 2^mbits) * 2^(e - bias), subnormal at e = 0.
double minifloat(uint32_t code, int ebits, int mbits, int bias, bool has_sign) {
  const uint32_t m = code & ((1u << mbits) - 1), e = (code >> mbits) & ((1u << ebits) - 1);
  const bool neg = has_sign && ((code >> (ebits + mbits)) & 1);
  const double frac = static_cast<double>(m) / static_cast<double>(1u << mbits);
  const double mag = e == 0 ? std::ldexp(frac, 1 - bias) : std::ldexp(1.0 + frac, static_cast<int>(e) - bias);
  return neg ? -mag : mag;
}

double ref_e4m3(uint8_t b) {  // float8_e4m3fn: S.EEEE.MMM, bias 7, only S.1111.111 is NaN
  if ((b & 0x7f) == 0x7f) return std::numeric_limits<double>::quiet_NaN();
  return minifloat(b, 4, 3, 7, true);
}
double ref_e2m1(uint8_t n) {  // S.EE.M, bias 1
  return minifloat(n, 2, 1, 1, true);
}
double ref_ue8m0(uint8_t b) {  // EEEEEEEE, bias 127, no mantissa; 0xff is NaN
  if (b == 0xff) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, static_cast<int>(b) - 127);
}

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Same value and same sign of zero (or both NaN).
::testing::AssertionResult same(float got, double want) {
  if (std::isnan(want)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << got << ", want NaN";
  }
  if (bits(got) == bits(static_cast<float>(want))) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

TEST(Fp8Fp4, E4m3EveryByteDecodes) {
  for (int b = 0; b < 256; ++b) {
    const uint8_t c = static_cast<uint8_t>(b);
    EXPECT_TRUE(same(e4m3_to_f32(c), ref_e4m3(c))) << "byte " << b;
  }
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::signbit(e4m3_to_f32(0x80)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
}

TEST(Fp8Fp4, Ue4m3AndUe8m0EveryByteDecodes) {
  for (int b = 0; b < 256; ++b) {
    const uint8_t c = static_cast<uint8_t>(b);
    EXPECT_TRUE(same(ue4m3_to_f32(c), ref_e4m3(static_cast<uint8_t>(c & 0x7f)))) << "byte " << b;
    EXPECT_TRUE(same(ue8m0_to_f32(c), ref_ue8m0(c))) << "byte " << b;
    EXPECT_TRUE(same(e8m0_to_f32_half(c), std::ldexp(1.0, b - 128))) << "byte " << b;
  }
  EXPECT_EQ(ue8m0_to_f32(127), 1.0f);
  EXPECT_EQ(ue8m0_to_f32(0), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(ue8m0_to_f32(255)));
}

TEST(Fp8Fp4, E2m1EveryNibbleDecodes) {
  for (int n = 0; n < 16; ++n) {
    const uint8_t c = static_cast<uint8_t>(n);
    EXPECT_TRUE(same(e2m1_to_f32(c), ref_e2m1(c))) << "nibble " << n;
    EXPECT_EQ(static_cast<double>(kMxfp4Values2x[n]), 2.0 * ref_e2m1(c)) << "nibble " << n;
  }
  EXPECT_TRUE(std::signbit(e2m1_to_f32(8)));
}

// The nearest code of x among codes [0, n_pos) of a sign-magnitude format (values increasing
// with the code), ties to the even code, magnitudes beyond the largest saturating; x's sign kept.
uint8_t nearest_code(double x, int n_pos, double (*value)(uint8_t), uint8_t sign_bit) {
  const double a = std::fabs(x);
  const uint8_t sign = std::signbit(x) ? sign_bit : 0;
  if (a >= value(static_cast<uint8_t>(n_pos - 1)))
    return static_cast<uint8_t>((n_pos - 1) | sign);  // saturates
  int best = 0;
  for (int c = 1; c < n_pos; ++c) {
    const double d = std::fabs(value(static_cast<uint8_t>(c)) - a);
    const double db = std::fabs(value(static_cast<uint8_t>(best)) - a);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return static_cast<uint8_t>(best | sign);
}

// Inputs: every value, every midpoint and its neighbours, a log-uniform sample, beyond the range.
std::vector<float> probes(int n_pos, double (*value)(uint8_t), double top) {
  std::vector<float> p = {0.0f, std::numeric_limits<float>::denorm_min(), static_cast<float>(top) * 1.5f,
                          static_cast<float>(top) * 1000.0f, std::numeric_limits<float>::infinity()};
  for (int c = 0; c < n_pos; ++c) {
    const float v = static_cast<float>(value(static_cast<uint8_t>(c)));
    p.push_back(v);
    const float mid = static_cast<float>(
        c + 1 < n_pos ? 0.5 * (value(static_cast<uint8_t>(c)) + value(static_cast<uint8_t>(c + 1)))
                      : 1.5 * top);
    for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) p.push_back(m);
  }
  std::mt19937 g(7);
  std::uniform_real_distribution<double> lg(std::log2(value(1)) - 3, std::log2(top) + 1);
  for (int i = 0; i < 4000; ++i) p.push_back(static_cast<float>(std::exp2(lg(g))));
  const size_t n = p.size();
  for (size_t i = 0; i < n; ++i) p.push_back(-p[i]);
  return p;
}

TEST(Fp8Fp4, E4m3RoundsToNearestEven) {
  for (float x : probes(0x7f, ref_e4m3, 448.0)) {
    const uint8_t want = nearest_code(x, 0x7f, ref_e4m3, 0x80);
    EXPECT_EQ(f32_to_e4m3(x), want) << x;
    EXPECT_TRUE(same(e4m3_round(x), ref_e4m3(want))) << x;
    if (!std::signbit(x)) {
      EXPECT_EQ(f32_to_ue4m3(x), want) << x;
      EXPECT_TRUE(same(ue4m3_round(x), ref_e4m3(want))) << x;
    }
  }
  for (int b = 0; b < 256; ++b) {  // every finite byte round-trips, -0 included
    if ((b & 0x7f) == 0x7f) continue;
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(static_cast<uint8_t>(b))), b) << b;
  }
  EXPECT_EQ(f32_to_e4m3(std::nanf("")), 0x7f);
  EXPECT_EQ(f32_to_e4m3(-std::nanf("")), 0xff);
  EXPECT_TRUE(std::isnan(e4m3_round(std::nanf(""))));
  // spot checks (the DeepSeek-V4.1 activation rounding relies on these)
  EXPECT_EQ(e4m3_round(1000.0f), 448.0f);
  EXPECT_EQ(e4m3_round(1.0625f), 1.0f);                  // tie between 1 and 1.125 -> even
  EXPECT_EQ(e4m3_round(1.1875f), 1.25f);                 // tie between 1.125 and 1.25 -> even
  EXPECT_EQ(e4m3_round(3.0f / 1024), 0.001953125f * 2);  // subnormal grid 2^-9 (tie 1.5 -> 2)
  EXPECT_EQ(e4m3_round(-0.3f), -0.3125f);
}

TEST(Fp8Fp4, E2m1RoundsToNearestEven) {
  for (float x : probes(8, ref_e2m1, 6.0)) {
    const uint8_t want = nearest_code(x, 8, ref_e2m1, 0x08);
    EXPECT_EQ(f32_to_e2m1(x), want) << x;
    EXPECT_TRUE(same(e2m1_round(x), ref_e2m1(want))) << x;
  }
  for (int n = 0; n < 16; ++n) EXPECT_EQ(f32_to_e2m1(e2m1_to_f32(static_cast<uint8_t>(n))), n) << n;
  EXPECT_EQ(e2m1_round(0.25f), 0.0f);
  EXPECT_EQ(e2m1_round(0.75f), 1.0f);
  EXPECT_EQ(e2m1_round(2.5f), 2.0f);
  EXPECT_EQ(e2m1_round(3.5f), 4.0f);
  EXPECT_EQ(e2m1_round(5.0f), 4.0f);
  EXPECT_EQ(e2m1_round(-5.1f), -6.0f);
  EXPECT_EQ(e2m1_round(7.5f), 6.0f);
}

TEST(Fp8Fp4, Ue8m0CeilIsTheSmallestPowerOfTwoAbove) {
  EXPECT_EQ(ue8m0_ceil(0.3f), 0.5f);
  EXPECT_EQ(ue8m0_ceil(0.5f), 0.5f);
  EXPECT_EQ(ue8m0_ceil_code(1.0f), 127);
  std::mt19937 g(3);
  std::uniform_real_distribution<double> lg(-125.5, 126.5);
  for (int i = 0; i < 4000; ++i) {
    const float x = static_cast<float>(std::exp2(lg(g)));
    const float p = ue8m0_ceil(x);
    int e;
    EXPECT_EQ(std::frexp(p, &e), 0.5f) << x;  // a power of two
    EXPECT_GE(p, x) << x;
    EXPECT_LT(p * 0.5f, x) << x;
    EXPECT_EQ(ue8m0_to_f32(ue8m0_ceil_code(x)), p) << x;
  }
}

}  // namespace
}  // namespace strata
