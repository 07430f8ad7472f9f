// AVX-512 conversions of DeepSeek's KV rows to f32 (KernelTraits::to_float of fp8_e4m3 and
// mxfp4), 16 values a step, bit-identical to quant/'s scalar to_float: the AVX2 versions'
// arithmetic (avx2_kv_float.cpp) with mask registers for the E4M3 subnormals and NaN.
// GCC 12's AVX-512 intrinsics trip maybe-uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/fp8_fp4.h"
#include "quant/qtypes.h"

namespace strata::x86::avx512 {
namespace {

// Sixteen E4M3 bytes (zero-extended to 32 bits) as their f32 values.
inline __m512 e4m3x16(__m512i v) {
  const __m512i mag = _mm512_and_si512(v, _mm512_set1_epi32(0x7f));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(v, _mm512_set1_epi32(0x80)), 24);
  // eeee >= 1: the f32 exponent e + 120 and mantissa m on top; eeee = 0: m·2^-9, exactly
  __m512 f = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23)));
  const __mmask16 sub = _mm512_cmplt_epu32_mask(mag, _mm512_set1_epi32(8));
  f = _mm512_mask_mul_ps(f, sub, _mm512_cvtepi32_ps(mag), _mm512_set1_ps(1.0f / 512.0f));
  const __mmask16 nan = _mm512_cmpeq_epu32_mask(mag, _mm512_set1_epi32(0x7f));
  f = _mm512_mask_mov_ps(f, nan, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(f), sign));
}

}  // namespace

void to_float_fp8_e4m3(const void* src, float* dst, int64_t n) {
  const BlockFp8E4m3* b = static_cast<const BlockFp8E4m3*>(src);
  for (int64_t i = 0; i < n / QK_FP8; ++i) {
    const __m512 s = _mm512_set1_ps(ue8m0_to_f32(b[i].e));
    float* y = dst + i * QK_FP8;
    for (int g = 0; g < QK_FP8; g += 16) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs + g));
      _mm512_storeu_ps(y + g, _mm512_mul_ps(e4m3x16(_mm512_cvtepu8_epi32(q)), s));
    }
  }
}

void to_float_mxfp4(const void* src, float* dst, int64_t n) {
  const BlockMxfp4* b = static_cast<const BlockMxfp4*>(src);
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values2x));
  const __m128i lo4 = _mm_set1_epi8(0x0f);
  for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
    const __m512 d = _mm512_set1_ps(e8m0_to_f32_half(b[i].e));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs));
    // values 0..15 from the low nibbles, 16..31 from the high ones
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, lo4));
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), lo4));
    float* y = dst + i * QK_MXFP4;
    _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), d));
    _mm512_storeu_ps(y + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), d));
  }
}

}  // namespace strata::x86::avx512
