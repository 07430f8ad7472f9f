// IEEE half and bfloat16 conversions, scalar and exact (round to nearest even), matching the
// F16C / AVX-512 BF16 hardware conversions bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

namespace strata {

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  if (exp == 0) {
    if (man == 0) return f32_from_bits(sign);
    // subnormal: value = man * 2^-24
    float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));  // inf/nan
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to >= 65520: overflow to inf
  if (ax < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // value / 2^-24, rounded to nearest even
    const float v = f32_from_bits(ax) * 16777216.0f;  // exact scale by 2^24
    uint32_t r = static_cast<uint32_t>(v);
    const float rem = v - static_cast<float>(r);
    if (rem > 0.5f || (rem == 0.5f && (r & 1))) r++;
    return static_cast<uint16_t>(sign | r);
  }
  // normal: rebias exponent, round mantissa 23 -> 10 bits to nearest even
  uint32_t m = ax + 0xc8000000u;  // exponent - 112
  m += 0xfff + ((m >> 13) & 1);
  return static_cast<uint16_t>(sign | (m >> 13));
}

inline float bf16_to_f32(uint16_t h) {
  return f32_from_bits(static_cast<uint32_t>(h) << 16);
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace strata
