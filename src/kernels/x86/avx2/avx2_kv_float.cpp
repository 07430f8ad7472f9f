// AVX2 conversions of DeepSeek's KV rows to f32 (KernelTraits::to_float of fp8_e4m3 and mxfp4),
// bit-identical to quant/'s scalar to_float: every E4M3 value is built exactly from its bits (a
// normal one by rebiasing the exponent, a subnormal one as m·2^-9, NaN as the scalar's quiet NaN)
// and then multiplied once by the block's UE8M0 scale, as the scalar does; MXFP4 takes its doubled
// E2M1 integers by a byte shuffle of ggml's table and multiplies each once by the half scale.
#include <immintrin.h>

#include "kernels/x86/avx2/avx2_kernels.h"
#include "quant/fp8_fp4.h"
#include "quant/qtypes.h"

namespace strata::x86::avx2 {
namespace {

// Eight E4M3 bytes (zero-extended to 32 bits) as their f32 values.
inline __m256 e4m3x8(__m256i v) {
  const __m256i mag = _mm256_and_si256(v, _mm256_set1_epi32(0x7f));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x80)), 24);
  // eeee >= 1: (1 + m/8)·2^(e-7), the f32 exponent e + 120 and mantissa m on top
  const __m256 normal =
      _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(mag, 20), _mm256_set1_epi32(120 << 23)));
  // eeee = 0: m·2^-9 (exact; no subnormal f32 in sight)
  const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(1.0f / 512.0f));
  const __m256 is_sub = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag));
  const __m256 is_nan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7f)));
  __m256 f = _mm256_blendv_ps(normal, sub, is_sub);
  f = _mm256_blendv_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), is_nan);
  return _mm256_or_ps(f, _mm256_castsi256_ps(sign));
}

}  // namespace

void to_float_fp8_e4m3(const void* src, float* dst, int64_t n) {
  const BlockFp8E4m3* b = static_cast<const BlockFp8E4m3*>(src);
  for (int64_t i = 0; i < n / QK_FP8; ++i) {
    const __m256 s = _mm256_set1_ps(ue8m0_to_f32(b[i].e));
    float* y = dst + i * QK_FP8;
    for (int g = 0; g < QK_FP8; g += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + g));
      _mm256_storeu_ps(y + g, _mm256_mul_ps(e4m3x8(_mm256_cvtepu8_epi32(q)), s));
    }
  }
}

void to_float_mxfp4(const void* src, float* dst, int64_t n) {
  const BlockMxfp4* b = static_cast<const BlockMxfp4*>(src);
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values2x));
  const __m128i lo4 = _mm_set1_epi8(0x0f);
  for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
    const __m256 d = _mm256_set1_ps(e8m0_to_f32_half(b[i].e));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs));
    // values 0..15 from the low nibbles, 16..31 from the high ones
    const __m128i v[2] = {_mm_shuffle_epi8(table, _mm_and_si128(q, lo4)),
                          _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), lo4))};
    float* y = dst + i * QK_MXFP4;
    for (int h = 0; h < 2; ++h) {
      const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v[h]));
      const __m256 c = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v[h], 8)));
      _mm256_storeu_ps(y + 16 * h, _mm256_mul_ps(a, d));
      _mm256_storeu_ps(y + 16 * h + 8, _mm256_mul_ps(c, d));
    }
  }
}

}  // namespace strata::x86::avx2
