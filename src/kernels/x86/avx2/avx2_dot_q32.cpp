// AVX2 dot products of 32-element block types with Q8_0 activations: exact int32 per block,
// then scaled and accumulated in f32 lanes (two accumulators).
#include <immintrin.h>

#include "base/fp16.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx2 {
namespace {

inline __m256i load32(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Σ_blocks scale(i) · dot(weights(i), x_i), weights(i) an __m256i of 32 signed bytes.
template <class Block, class Weights, class Scale>
float dot_blocks(int64_t nb, const Block* w, const BlockQ8_0* x, Weights weights, Scale scale) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m256i p0 = dot_i8x32(weights(w[i]), load32(x[i].qs));
    const __m256i p1 = dot_i8x32(weights(w[i + 1]), load32(x[i + 1].qs));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(scale(w[i], x[i])), _mm256_cvtepi32_ps(p0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(scale(w[i + 1], x[i + 1])), _mm256_cvtepi32_ps(p1), acc1);
  }
  if (i < nb) {
    const __m256i p0 = dot_i8x32(weights(w[i]), load32(x[i].qs));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(scale(w[i], x[i])), _mm256_cvtepi32_ps(p0), acc0);
  }
  return hsum_f32x8(_mm256_add_ps(acc0, acc1));
}

}  // namespace

float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* x) {
  return dot_blocks(
      n / QK8_0, static_cast<const BlockQ8_0*>(w), static_cast<const BlockQ8_0*>(x),
      [](const BlockQ8_0& b) { return load32(b.qs); },
      [](const BlockQ8_0& a, const BlockQ8_0& b) { return h2f(a.d) * h2f(b.d); });
}

float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* x) {
  const __m256i eight = _mm256_set1_epi8(8);
  return dot_blocks(
      n / QK4_0, static_cast<const BlockQ4_0*>(w), static_cast<const BlockQ8_0*>(x),
      [eight](const BlockQ4_0& b) { return _mm256_sub_epi8(nibbles_32(b.qs), eight); },
      [](const BlockQ4_0& a, const BlockQ8_0& b) { return h2f(a.d) * h2f(b.d); });
}

float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* x) {
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values2x)));
  return dot_blocks(
      n / QK_MXFP4, static_cast<const BlockMxfp4*>(w), static_cast<const BlockQ8_0*>(x),
      [table](const BlockMxfp4& b) { return _mm256_shuffle_epi8(table, nibbles_32(b.qs)); },
      [](const BlockMxfp4& a, const BlockQ8_0& b) { return h2f(b.d) * e8m0_to_f32_half(a.e); });
}

}  // namespace strata::x86::avx2
