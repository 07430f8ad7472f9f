// AVX2 NVFP4 (quant/nvfp4.cpp) against Q8_0 activations: vec_dot and the one-token gemv, rows in
// groups of 4 that share the activation loads and their offset correction (as avx2_gemv.cpp).
// Per 64-element block: the 32 code bytes split into low / high nibbles and regrouped into element
// order (sub-blocks 0-1 meet activation block 2i, 2-3 block 2i + 1), LUT-decoded to
// 2·E2M1 + 12 ∈ [0, 24], multiplied unsigned × signed (VPMADDUBSW) less the shared 12·x pair sums
// and widened (VPMADDWD): 8 exact int32 lanes, 4 per sub-block, scaled by their sub-block's
// scale · dx in f32 lanes. A row's arithmetic does not depend on the group, so gemv equals this
// vec_dot bit for bit (and both equal the scalar vec_dot up to f32 summation order).
#include <immintrin.h>

#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "quant/fp8_fp4.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx2 {
namespace {

constexpr int kRows = 4;
constexpr int kPrefetchGroups = 2;

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The 64 nibbles of a block in element order: lo = elements 0-31, hi = 32-63.
inline void nvfp4_nibbles(const uint8_t* qs, __m256i* lo, __m256i* hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i raw = load256(qs);
  const __m256i l = _mm256_and_si256(raw, m4), h = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
  // Per 128-bit lane (sub-blocks 0, 1 | 2, 3): bytes 0-7 = low nibbles of sub-block 2k's bytes,
  // then its high nibbles; likewise bytes 8-15 for sub-block 2k + 1.
  const __m256i even = _mm256_unpacklo_epi64(l, h), odd = _mm256_unpackhi_epi64(l, h);
  *lo = _mm256_permute2x128_si256(even, odd, 0x20);
  *hi = _mm256_permute2x128_si256(even, odd, 0x31);
}

template <int R>
void rows_nvfp4(int64_t nb, const uint8_t* w, size_t ws, const BlockQ8_0* x, float* y) {
  const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0, 12, 13, 14,
                                       15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  const __m256i twelve = _mm256_set1_epi8(12), ones = _mm256_set1_epi16(1);
  const float* scale = kNvfp4ScaleHalf.data();
  const size_t pf = static_cast<size_t>(kPrefetchGroups * kRows) * ws;
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i x0 = load256(x[2 * i].qs), x1 = load256(x[2 * i + 1].qs);
    const __m256i c0 = _mm256_maddubs_epi16(twelve, x0), c1 = _mm256_maddubs_epi16(twelve, x1);
    const float dx0 = h2f(x[2 * i].d), dx1 = h2f(x[2 * i + 1].d);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* bp = w + static_cast<size_t>(r) * ws + static_cast<size_t>(i) * sizeof(BlockNvfp4);
      _mm_prefetch(reinterpret_cast<const char*>(bp + pf), _MM_HINT_T0);
      const BlockNvfp4& b = *reinterpret_cast<const BlockNvfp4*>(bp);
      __m256i lo, hi;
      nvfp4_nibbles(b.qs, &lo, &hi);
      const __m256i p0 = _mm256_madd_epi16(
          _mm256_sub_epi16(_mm256_maddubs_epi16(_mm256_shuffle_epi8(lut, lo), x0), c0), ones);
      const __m256i p1 = _mm256_madd_epi16(
          _mm256_sub_epi16(_mm256_maddubs_epi16(_mm256_shuffle_epi8(lut, hi), x1), c1), ones);
      const __m256 s0 = _mm256_set_m128(_mm_set1_ps(scale[b.d[1]] * dx0), _mm_set1_ps(scale[b.d[0]] * dx0));
      const __m256 s1 = _mm256_set_m128(_mm_set1_ps(scale[b.d[3]] * dx1), _mm_set1_ps(scale[b.d[2]] * dx1));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), s0, acc[r]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), s1, acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[r] = hsum_f32x8(acc[r]);
}

}  // namespace

float vec_dot_nvfp4_q8_0(int64_t n, const void* w, const void* x) {
  float y;
  rows_nvfp4<1>(n / QK_NVFP4, static_cast<const uint8_t*>(w), 0, static_cast<const BlockQ8_0*>(x), &y);
  return y;
}

void gemv_nvfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  const int64_t nb = n / QK_NVFP4;
  const uint8_t* w8 = static_cast<const uint8_t*>(w);
  const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x);
  int64_t r = 0;
  for (; r + kRows <= nr; r += kRows) rows_nvfp4<kRows>(nb, w8 + static_cast<size_t>(r) * ws, ws, xb, y + r);
  for (; r < nr; ++r) rows_nvfp4<1>(nb, w8 + static_cast<size_t>(r) * ws, ws, xb, y + r);
}

}  // namespace strata::x86::avx2
