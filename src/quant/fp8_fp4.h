// The FP8 / FP4 element codecs, one definition each (OCP MX and NVFP4 element and scale formats):
//   E4M3  (float8_e4m3fn): sign, 4-bit exponent (bias 7), 3-bit mantissa; subnormals m·2^-9;
//         no infinities, 0x7f / 0xff are NaN; largest finite ±448 (0x7e / 0xfe).
//   UE4M3 the unsigned E4M3 of NVFP4's per-16 sub-block scales: an E4M3 byte with the sign bit 0.
//   E2M1  (FP4): sign bit 3, then {0, 0.5, 1, 1.5, 2, 3, 4, 6}; no NaN or infinity.
//   UE8M0 the MX block scale: an f32 exponent byte alone, 2^(b-127); 0xff is NaN.
// Decodes are exact. Roundings go to the nearest representable value, ties to even, and saturate
// at the largest finite magnitude (448 for E4M3, 6 for E2M1); NaN passes through.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "base/fp16.h"

namespace strata {

// --- E4M3 ---------------------------------------------------------------------------------
float e4m3_to_f32(uint8_t b);

// Nearest E4M3 value of x as an f32 (±0 and NaN pass through, |x| > 448 gives ±448).
inline float e4m3_round(float x) {
  const float a = std::fabs(x);
  if (!(a > 0.0f)) return x;  // 0 (and NaN passthrough)
  float r;
  if (a < 0.015625f) {  // below 2^-6: subnormal grid of 2^-9
    r = std::nearbyint(a * 512.0f) / 512.0f;
  } else {
    int e;
    std::frexp(a, &e);                           // a = f * 2^e, f in [0.5, 1)
    const float step = std::ldexp(1.0f, e - 4);  // 3 mantissa bits
    r = std::nearbyint(a / step) * step;
  }
  if (r > 448.0f) r = 448.0f;
  return std::copysign(r, x);
}

// The byte of e4m3_round(x) (NaN -> 0x7f with x's sign).
uint8_t f32_to_e4m3(float x);

// --- UE4M3 --------------------------------------------------------------------------------
inline float ue4m3_to_f32(uint8_t b) {
  return e4m3_to_f32(static_cast<uint8_t>(b & 0x7f));
}
// Nearest UE4M3 value of x >= 0 (the sign is dropped: a scale is a magnitude).
inline float ue4m3_round(float x) {
  return std::fabs(e4m3_round(x));
}
uint8_t f32_to_ue4m3(float x);

// NVFP4's sub-block scale byte as ggml reads it (ggml_ue4m3_to_fp32), so every byte is a finite
// scale: the low seven bits as UE4M3, except that 0x7f (E4M3's NaN) reads 0 and 0xff reads 480
// (exponent 15, mantissa 7). kNvfp4ScaleHalf holds half of that, the factor that multiplies
// kMxfp4Values2x (ggml stores it so). Encoders write UE4M3 bytes 0..0x7e (f32_to_ue4m3).
extern const std::array<float, 256> kNvfp4ScaleHalf;
inline float nvfp4_scale_to_f32(uint8_t b) {
  return 2.0f * kNvfp4ScaleHalf[b];
}

// --- E2M1 ---------------------------------------------------------------------------------
// E2M1 values doubled (ggml's table, read by the MXFP4 kernels as int8 lanes): value =
// kMxfp4Values2x[nibble] / 2, the sign of nibble 8 (-0) aside.
extern const int8_t kMxfp4Values2x[16];

inline float e2m1_to_f32(uint8_t nibble) {
  const float m = 0.5f * static_cast<float>(kMxfp4Values2x[nibble & 7]);
  return (nibble & 8) ? -m : m;
}

// Nearest E2M1 value of x as an f32 (grid steps 0.5 below 2, 1 below 4, then 2; |x| > 6 gives ±6).
inline float e2m1_round(float x) {
  const float a = std::fabs(x);
  const float step = a < 2.0f ? 0.5f : (a < 4.0f ? 1.0f : 2.0f);
  const float r = std::nearbyint(a / step) * step;
  return std::copysign(r > 6.0f ? 6.0f : r, x);
}

// The nibble of e2m1_round(x) (NaN, which E2M1 cannot hold, gives 0).
uint8_t f32_to_e2m1(float x);

// E2M1 pairs (DeepSeek's / torch's float4_e2m1fn_x2: element 2i in the low nibble of byte i, 2i+1
// in the high) to MXFP4 blocks (quant/qtypes.h BlockMxfp4: the UE8M0 scale, then element j in the
// low nibble of qs[j], j + 16 in the high), losslessly: n blocks from codes [n][16] and scales [n]
// into dst [n][17]. dst may overlap the inputs as a forward in-place conversion needs: block i is
// read before it is written, so dst + 17 (i + 1) <= codes + 16 (i + 1) and <= scales + i + 1 for
// every i keeps every later block intact (e.g. codes >= dst + n, scales >= dst + 16 n + n).
// Returns the index of the first block whose scale is 0xff (NaN), or -1 (every block converted).
int64_t e2m1_pairs_to_mxfp4(const uint8_t* codes, const uint8_t* scales, int64_t n, uint8_t* dst);

// --- UE8M0 --------------------------------------------------------------------------------
// 2^(b-127) (2^-127 is an exact f32 subnormal); 255 is NaN. Inline bits: the SIMD row
// conversions (kernels/x86) call it once per block.
inline float ue8m0_to_f32(uint8_t b) {
  return f32_from_bits(b == 0xff ? 0x7fc00000u : b == 0 ? 0x00400000u : static_cast<uint32_t>(b) << 23);
}

// Smallest power of two >= x for a positive normal x: the UE8M0 scale the DeepSeek reference
// kernels pick. Its byte is ue8m0_ceil_code(x).
inline float ue8m0_ceil(float x) {
  uint32_t b = f32_bits(x);
  int32_t e = static_cast<int32_t>((b >> 23) & 0xff);
  if (b & 0x7fffffu) e += 1;
  return f32_from_bits(static_cast<uint32_t>(e) << 23);
}
inline uint8_t ue8m0_ceil_code(float x) {
  return static_cast<uint8_t>(f32_bits(ue8m0_ceil(x)) >> 23);
}

// MXFP4's half scale 2^(e-128), which times kMxfp4Values2x gives the E2M1 value times 2^(e-127):
// exact: a normal float with biased exponent e−1, or for e < 2 the subnormals 2^−128, 2^−127.
inline float e8m0_to_f32_half(uint8_t e) {
  return f32_from_bits(e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23));
}

}  // namespace strata
