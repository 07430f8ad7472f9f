// The FP8 / FP4 element codecs (fp8_fp4.h): byte decodes and encodes.
#include "quant/fp8_fp4.h"

#include <bit>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace strata {

const int8_t kMxfp4Values2x[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

namespace {
// Half of ggml's UE4M3 reading (fp8_fp4.h): m·2^-10 for exponent 0, (8 + m)·2^(e-11) above it.
constexpr std::array<float, 256> make_nvfp4_scale_half() {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) {
    const int e = (b >> 3) & 0xf, m = b & 0x7;
    if (b == 0x7f) continue;  // reads 0
    int p = e == 0 ? -10 : e - 11;
    float v = static_cast<float>(e == 0 ? m : 8 + m);
    for (; p < 0; ++p) v *= 0.5f;  // exact: powers of two
    for (; p > 0; --p) v *= 2.0f;
    t[static_cast<size_t>(b)] = v;
  }
  return t;
}
}  // namespace

constinit const std::array<float, 256> kNvfp4ScaleHalf = make_nvfp4_scale_half();

float e4m3_to_f32(uint8_t b) {
  const uint32_t e = (b >> 3) & 0xf, m = b & 0x7;
  if (e == 0xf && m == 0x7) return std::nanf("");
  // subnormal: m * 2^-9; normal: (8 + m) * 2^(e - 10)
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                           : std::ldexp(static_cast<float>(8 + m), static_cast<int>(e) - 10);
  return (b & 0x80) ? -mag : mag;
}

uint8_t f32_to_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | 0x7f;
  const float a = std::fabs(e4m3_round(x));
  if (a < 0.015625f) return sign | static_cast<uint8_t>(a * 512.0f);  // subnormal (or zero): m * 2^-9
  const uint32_t bits = f32_bits(a);
  const uint32_t e = ((bits >> 23) & 0xff) - 127 + 7, m = (bits >> 20) & 0x7;  // e in 1..15
  return static_cast<uint8_t>(sign | (e << 3) | m);
}

uint8_t f32_to_ue4m3(float x) {
  return static_cast<uint8_t>(f32_to_e4m3(ue4m3_round(x)) & 0x7f);
}

uint8_t f32_to_e2m1(float x) {
  if (std::isnan(x)) return 0;
  const float r = e2m1_round(x);
  const float twice = 2.0f * std::fabs(r);
  uint8_t k = 0;
  while (k < 7 && static_cast<float>(kMxfp4Values2x[k]) != twice) ++k;
  return static_cast<uint8_t>((std::signbit(r) ? 8 : 0) | k);
}

int64_t e2m1_pairs_to_mxfp4(const uint8_t* codes, const uint8_t* scales, int64_t n, uint8_t* dst) {
  // Byte i of the pairs holds elements 2i (low) and 2i + 1 (high); qs[j] wants j (low) and j + 16
  // (high). So qs[2i] = lo(b[i]) | lo(b[8 + i]) << 4 and qs[2i + 1] = hi(b[i]) | hi(b[8 + i]) << 4,
  // eight bytes at a time in a 64-bit word (the I/O threads run this on every streamed FP4 expert).
  static_assert(std::endian::native == std::endian::little, "byte i of a word is bits 8i..8i+7");
  constexpr uint64_t kLo = 0x0f0f0f0f0f0f0f0full;
  for (int64_t b = 0; b < n; ++b) {
    uint64_t a, c;
    std::memcpy(&a, codes + 16 * b, 8);
    std::memcpy(&c, codes + 16 * b + 8, 8);
    const uint8_t e = scales[b];
    if (e == 0xff) return b;
    const uint64_t even = (a & kLo) | ((c & kLo) << 4), odd = ((a >> 4) & kLo) | (c & ~kLo);
    dst[17 * b] = e;
#if defined(__SSE2__)
    // qs = even and odd bytes interleaved: one unpack (SSE2 is x86-64's baseline).
    const __m128i qs = _mm_unpacklo_epi8(_mm_cvtsi64_si128(static_cast<long long>(even)),
                                         _mm_cvtsi64_si128(static_cast<long long>(odd)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 17 * b + 1), qs);
#else
    for (int i = 0; i < 8; ++i) {
      dst[17 * b + 1 + 2 * i] = static_cast<uint8_t>(even >> (8 * i));
      dst[17 * b + 2 + 2 * i] = static_cast<uint8_t>(odd >> (8 * i));
    }
#endif
  }
  return -1;
}

}  // namespace strata
