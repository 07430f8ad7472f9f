// AVX-512 VNNI dot products of 32-element block types with Q8_0 activations, two blocks per
// 512-bit register: exact int32 per block (VPDPBUSD), scaled and accumulated in f32 lanes.
// GCC 12 flags its own AVX-512 intrinsics (they start from _mm512_undefined_*) as
// maybe-uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include "base/fp16.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}

// Signed w · signed x per 4 bytes: |w| (as unsigned) · (x with w's sign). PRECOND: x ≠ −128.
inline __m512i dot_i8(__m512i w, __m512i x) {
  const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), sx);
}

// Σ over blocks of scale · Σ_j w_j·x_j. Pair(i, j) returns the int32 lanes of blocks i and j
// (j may repeat i with a zero scale for an odd tail).
template <class Block, class Pair, class Scale>
float dot_blocks(int64_t nb, const Block* w, const BlockQ8_0* x, Pair pair, Scale scale) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m512 s =
        _mm512_insertf32x8(_mm512_set1_ps(scale(w[i], x[i])), _mm256_set1_ps(scale(w[i + 1], x[i + 1])), 1);
    acc = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(pair(w[i], x[i], w[i + 1], x[i + 1])), acc);
  }
  if (i < nb) {
    const __m512 s = _mm512_insertf32x8(_mm512_set1_ps(scale(w[i], x[i])), _mm256_setzero_ps(), 1);
    acc = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(pair(w[i], x[i], w[i], x[i])), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace

float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* x) {
  return dot_blocks(
      n / QK8_0, static_cast<const BlockQ8_0*>(w), static_cast<const BlockQ8_0*>(x),
      [](const BlockQ8_0& a0, const BlockQ8_0& b0, const BlockQ8_0& a1, const BlockQ8_0& b1) {
        return dot_i8(join(load256(a0.qs), load256(a1.qs)), join(load256(b0.qs), load256(b1.qs)));
      },
      [](const BlockQ8_0& a, const BlockQ8_0& b) { return h2f(a.d) * h2f(b.d); });
}

float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* x) {
  const __m512i eight = _mm512_set1_epi8(8);
  return dot_blocks(
      n / QK4_0, static_cast<const BlockQ4_0*>(w), static_cast<const BlockQ8_0*>(x),
      [eight](const BlockQ4_0& a0, const BlockQ8_0& b0, const BlockQ4_0& a1, const BlockQ8_0& b1) {
        // (nibble − 8)·x = nibble·x − 8·x, both as unsigned·signed VNNI products.
        const __m512i xv = join(load256(b0.qs), load256(b1.qs));
        const __m512i nib = join(nibbles_32(a0.qs), nibbles_32(a1.qs));
        const __m512i z = _mm512_setzero_si512();
        return _mm512_sub_epi32(_mm512_dpbusd_epi32(z, nib, xv), _mm512_dpbusd_epi32(z, eight, xv));
      },
      [](const BlockQ4_0& a, const BlockQ8_0& b) { return h2f(a.d) * h2f(b.d); });
}

float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* x) {
  // |E2M1|·2 by nibble; the sign is the nibble's bit 3.
  const __m512i mag = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12));
  const __m512i sign_bit = _mm512_set1_epi8(8);
  return dot_blocks(
      n / QK_MXFP4, static_cast<const BlockMxfp4*>(w), static_cast<const BlockQ8_0*>(x),
      [mag, sign_bit](const BlockMxfp4& a0, const BlockQ8_0& b0, const BlockMxfp4& a1, const BlockQ8_0& b1) {
        const __m512i xv = join(load256(b0.qs), load256(b1.qs));
        const __m512i nib = join(nibbles_32(a0.qs), nibbles_32(a1.qs));
        const __m512i sx =
            _mm512_mask_sub_epi8(xv, _mm512_test_epi8_mask(nib, sign_bit), _mm512_setzero_si512(), xv);
        return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi8(mag, nib), sx);
      },
      [](const BlockMxfp4& a, const BlockQ8_0& b) { return h2f(b.d) * e8m0_to_f32_half(a.e); });
}

}  // namespace strata::x86::avx512
