// AVX-512 VNNI NVFP4 (quant/nvfp4.cpp) against Q8_0 activations: vec_dot and the one-token gemv,
// rows in groups of 4 sharing the activation loads and their offset correction. Per 64-element
// block, one 512-bit register: the code bytes regrouped into element order (its two activation
// blocks side by side), LUT-decoded to 2·E2M1 + 12 ∈ [0, 24], VPDPBUSD against x less the shared
// 12·x sums: 16 exact int32 lanes, 4 per sub-block, scaled by the sub-block's scale · dx in f32
// lanes. A row's arithmetic does not depend on the group, so gemv equals this vec_dot bit for bit
// (both equal the scalar vec_dot up to f32 summation order).
// GCC 12 flags its own AVX-512 intrinsics as maybe-uninitialized once inlined (avx512_dot_q32.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/fp8_fp4.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

constexpr int kRows = 4;
constexpr int kPrefetchGroups = 2;

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}

// The 64 nibbles of a block in element order.
inline __m512i nvfp4_nibbles(const uint8_t* qs) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i raw = load256(qs);
  const __m256i l = _mm256_and_si256(raw, m4), h = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
  // Per 128-bit lane (sub-blocks 0, 1 | 2, 3): sub-block 2k's low then high nibbles, then 2k + 1's.
  const __m256i even = _mm256_unpacklo_epi64(l, h), odd = _mm256_unpackhi_epi64(l, h);
  return join(_mm256_permute2x128_si256(even, odd, 0x20), _mm256_permute2x128_si256(even, odd, 0x31));
}

template <int R>
void rows_nvfp4(int64_t nb, const uint8_t* w, size_t ws, const BlockQ8_0* x, float* y) {
  const __m512i lut =
      _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
  const __m512i twelve = _mm512_set1_epi8(12);
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const float* scale = kNvfp4ScaleHalf.data();
  const size_t pf = static_cast<size_t>(kPrefetchGroups * kRows) * ws;
  __m512 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m512i xv = join(load256(x[2 * i].qs), load256(x[2 * i + 1].qs));
    const __m512i corr = _mm512_dpbusd_epi32(_mm512_setzero_si512(), twelve, xv);
    const float dx0 = h2f(x[2 * i].d), dx1 = h2f(x[2 * i + 1].d);
    const __m128 dx = _mm_setr_ps(dx0, dx0, dx1, dx1);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* bp = w + static_cast<size_t>(r) * ws + static_cast<size_t>(i) * sizeof(BlockNvfp4);
      _mm_prefetch(reinterpret_cast<const char*>(bp + pf), _MM_HINT_T0);
      const BlockNvfp4& b = *reinterpret_cast<const BlockNvfp4*>(bp);
      const __m512i u = _mm512_shuffle_epi8(lut, nvfp4_nibbles(b.qs));
      const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u, xv), corr);
      const __m128 s4 =
          _mm_mul_ps(_mm_setr_ps(scale[b.d[0]], scale[b.d[1]], scale[b.d[2]], scale[b.d[3]]), dx);
      const __m512 s = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(s4));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), s, acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[r] = _mm512_reduce_add_ps(acc[r]);
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

}  // namespace strata::x86::avx512
