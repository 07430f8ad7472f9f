// AVX2 f32 / f16 / bf16 dot products (4 independent f32 accumulators) and conversions.
#include <immintrin.h>

#include "base/fp16.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"

namespace strata::x86::avx2 {
namespace {

inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load_bf16x8(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline __m256 load_f32x8(const float* p) {
  return _mm256_loadu_ps(p);
}

// Σ a_i·b_i over 32-element steps with four accumulators, then the tail in scalar f32.
template <class T, __m256 (*Load)(const T*), float (*Scalar)(T)>
float dot(int64_t n, const T* a, const T* b) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(Load(a + i), Load(b + i), acc0);
    acc1 = _mm256_fmadd_ps(Load(a + i + 8), Load(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(Load(a + i + 16), Load(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(Load(a + i + 24), Load(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(Load(a + i), Load(b + i), acc0);
  float sum = hsum_f32x8(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) sum += Scalar(a[i]) * Scalar(b[i]);
  return sum;
}

inline float id_f32(float v) {
  return v;
}

}  // namespace

float vec_dot_f32(int64_t n, const void* w, const void* x) {
  return dot<float, load_f32x8, id_f32>(n, static_cast<const float*>(w), static_cast<const float*>(x));
}
float vec_dot_f16(int64_t n, const void* w, const void* x) {
  return dot<uint16_t, load_f16x8, fp16_to_f32>(n, static_cast<const uint16_t*>(w),
                                                static_cast<const uint16_t*>(x));
}
float vec_dot_bf16(int64_t n, const void* w, const void* x) {
  return dot<uint16_t, load_bf16x8, bf16_to_f32>(n, static_cast<const uint16_t*>(w),
                                                 static_cast<const uint16_t*>(x));
}

void to_float_f16(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16x8(s + i));
  for (; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
}

void from_float_f16(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
  }
  for (; i < n; ++i) d[i] = f32_to_fp16(src[i]);
}

void to_float_bf16(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_bf16x8(s + i));
  for (; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

// Round to nearest even on the bit pattern (as base/fp16.h does), NaNs made quiet.
void from_float_bf16(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(x, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(x, 16), one))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet);
    const __m256i r = _mm256_blendv_epi8(rounded, qnan, nan);
    // 8 × u32 (all < 2^16) → 8 × u16 in order.
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), packed);
  }
  for (; i < n; ++i) d[i] = f32_to_bf16(src[i]);
}

}  // namespace strata::x86::avx2
