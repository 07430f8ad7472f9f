// AVX-512 VNNI dot products of K-quant super-blocks with Q8_K activations. Per super-block the
// sums are exact int32 and the f32 scaling matches the scalar reference, so results are
// bit-identical to it.
// No FMA contraction: the f32 scaling must round exactly as the scalar reference does.
#pragma GCC optimize("fp-contract=off")

// GCC 12 flags its own AVX-512 intrinsics (they start from _mm512_undefined_*) as
// maybe-uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "base/fp16.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/q4_k_scales.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m512i load512(const void* p) {
  return _mm512_loadu_si512(p);
}
inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}

// Four int8 scales, each repeated over 4 int32 lanes: the lanes VPDPBUSD fills for 16 bytes.
inline __m512i scales_x4(const int8_t* s) {
  int32_t v;
  std::memcpy(&v, s, 4);
  const __m128i rep =
      _mm_shuffle_epi8(_mm_cvtsi32_si128(v), _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
  return _mm512_cvtepi8_epi32(rep);
}

}  // namespace

float vec_dot_q4_k_q8_k(int64_t n, const void* w, const void* x) {
  const BlockQ4_K* a = static_cast<const BlockQ4_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    uint8_t sc[8], m[8];
    q4_k_unpack_scales(a[i].scales, sc, m);
    int32_t summ = 0;
    for (int j = 0; j < 8; ++j) summ += m[j] * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
    __m512i acc = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      // 64 elements: low nibbles (sub-block 2c) then high nibbles (2c+1); q8 is contiguous.
      const __m256i q = load256(a[i].qs + 32 * c);
      const __m512i nib = join(_mm256_and_si256(q, low4), _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
      const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nib, load512(b[i].qs + 64 * c));
      const __m512i s = _mm512_inserti64x4(_mm512_set1_epi32(sc[2 * c]), _mm256_set1_epi32(sc[2 * c + 1]), 1);
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(p, s));
    }
    const int32_t sumi = _mm512_reduce_add_epi32(acc);
    const float d = h2f(a[i].d) * b[i].d;
    const float dmin = h2f(a[i].dmin) * b[i].d;
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return sum;
}

float vec_dot_q6_k_q8_k(int64_t n, const void* w, const void* x) {
  const BlockQ6_K* a = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    // q − 32 applied through the block sums: Σ sc·(q−32)·y = Σ sc·q·y − 32·Σ_j sc_j·bsums_j.
    int32_t offset = 0;
    for (int j = 0; j < 16; ++j) offset += a[i].scales[j] * b[i].bsums[j];
    __m512i acc = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = load512(a[i].ql + 64 * h);
      const __m256i qh = load256(a[i].qh + 32 * h);
      // Elements 0..63 of the half: low nibbles of ql with qh bits 0-1 (0..31) and 2-3 (32..63);
      // elements 64..127: high nibbles with qh bits 4-5 and 6-7.
      const __m512i qh_a = join(qh, _mm256_srli_epi16(qh, 2));
      const __m512i qh_b = join(_mm256_srli_epi16(qh, 4), _mm256_srli_epi16(qh, 6));
      const __m512i qa =
          _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_slli_epi16(_mm512_and_si512(qh_a, low2), 4));
      const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                         _mm512_slli_epi16(_mm512_and_si512(qh_b, low2), 4));
      const __m512i pa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qa, load512(b[i].qs + 128 * h));
      const __m512i pb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qb, load512(b[i].qs + 128 * h + 64));
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(pa, scales_x4(a[i].scales + 8 * h)));
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(pb, scales_x4(a[i].scales + 8 * h + 4)));
    }
    const int32_t sumi = _mm512_reduce_add_epi32(acc) - 32 * offset;
    sum += (h2f(a[i].d) * b[i].d) * static_cast<float>(sumi);
  }
  return sum;
}

}  // namespace strata::x86::avx512
