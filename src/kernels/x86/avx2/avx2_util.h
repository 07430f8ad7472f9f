// Small AVX2 helpers shared by the AVX2 (and AVX-512 tail) kernels. Include only from files
// compiled with -mavx2 -mfma -mf16c.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace strata::x86 {

// Hardware (F16C) half conversions, exact and bit-identical to base/fp16.h's.
inline float h2f(uint16_t h) {
  return _cvtsh_ss(h);
}
inline uint16_t f2h(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

inline float hsum_f32x8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t hsum_i32x8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

inline float hmax_f32x8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// 32 signed bytes w·x summed in pairs of 4 → 8 int32. PRECOND: no x byte is −128 (activation
// quantizers never produce it); w may be anything (|−128| is taken as unsigned 128).
inline __m256i dot_i8x32(__m256i w, __m256i x) {
  const __m256i aw = _mm256_sign_epi8(w, w);
  const __m256i sx = _mm256_sign_epi8(x, w);
  const __m256i p16 = _mm256_maddubs_epi16(aw, sx);
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// 16 packed bytes → 32 nibbles: bytes 0..15 = low nibbles, 16..31 = high nibbles (the Q4_0 /
// MXFP4 element order).
inline __m256i nibbles_32(const uint8_t* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

// The same 32 nibbles from one broadcast load: the high 128-bit lane shifted right by 4.
inline __m256i nibbles_32_bcast(const uint8_t* p) {
  const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_and_si256(_mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
}

// Eight vectors of 8 int32 → one vector of their eight sums (lane c: Σ of p[c]'s lanes; exact).
inline __m256i hsum_i32x8x8(const __m256i* p) {
  const __m256i s01 = _mm256_hadd_epi32(p[0], p[1]), s23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i s45 = _mm256_hadd_epi32(p[4], p[5]), s67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(s01, s23), b = _mm256_hadd_epi32(s45, s67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// Quants 32g..32g+31 (g < 4) of one Q6_K half as unsigned 6-bit bytes (quant/q6_k.cpp's
// layout): low 4 bits from ql0 (g = 0, 2) / ql1 (g = 1, 3), low or high nibble by g < 2, and bits
// 2g..2g+1 of qh above them.
inline __m256i q6k_quants32(__m256i ql0, __m256i ql1, __m256i qh, int g) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(0x03);
  const __m256i l = g % 2 == 0 ? ql0 : ql1;
  const __m256i lq = g < 2 ? _mm256_and_si256(l, low4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), low4);
  const __m256i hq = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), low2);
  return _mm256_or_si256(lq, _mm256_slli_epi16(hq, 4));
}

}  // namespace strata::x86
