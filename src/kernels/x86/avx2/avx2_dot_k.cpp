// AVX2 dot products of K-quant super-blocks with Q8_K activations. The per-super-block sums
// are exact int32 and the f32 scaling is done as in the scalar reference, so the results are
// bit-identical to it.
// No FMA contraction: the f32 scaling must round exactly as the scalar reference does.
#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>

#include "base/fp16.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "quant/q4_k_scales.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx2 {
namespace {

inline __m256i load32(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
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
    __m256i acc = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load32(a[i].qs + 32 * c);
      const __m256i lo = _mm256_and_si256(q, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      // nibble (0..15, unsigned) × q8 (signed): pair sums fit int16 (≤ 2·15·128).
      const __m256i p_lo = _mm256_maddubs_epi16(lo, load32(b[i].qs + 64 * c));
      const __m256i p_hi = _mm256_maddubs_epi16(hi, load32(b[i].qs + 64 * c + 32));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p_lo, _mm256_set1_epi16(sc[2 * c])));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p_hi, _mm256_set1_epi16(sc[2 * c + 1])));
    }
    const int32_t sumi = hsum_i32x8(acc);
    const float d = h2f(a[i].d) * b[i].d;
    const float dmin = h2f(a[i].dmin) * b[i].d;
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return sum;
}

float vec_dot_q6_k_q8_k(int64_t n, const void* w, const void* x) {
  const BlockQ6_K* a = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    // q − 32 applied through the block sums: Σ sc·(q−32)·y = Σ sc·q·y − 32·Σ_j sc_j·bsums_j.
    int32_t offset = 0;
    for (int j = 0; j < 16; ++j) offset += a[i].scales[j] * b[i].bsums[j];
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load32(a[i].ql + 64 * h), ql1 = load32(a[i].ql + 64 * h + 32);
      const __m256i qh = load32(a[i].qh + 32 * h);
      for (int g = 0; g < 4; ++g) {
        const int sub = 8 * h + 2 * g;  // sub-blocks of 16 covered by these 32 elements
        const __m256i p =
            _mm256_maddubs_epi16(q6k_quants32(ql0, ql1, qh, g), load32(b[i].qs + 128 * h + 32 * g));
        const __m256i s =
            _mm256_set_m128i(_mm_set1_epi16(a[i].scales[sub + 1]), _mm_set1_epi16(a[i].scales[sub]));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
      }
    }
    const int32_t sumi = hsum_i32x8(acc) - 32 * offset;
    sum += (h2f(a[i].d) * b[i].d) * static_cast<float>(sumi);
  }
  return sum;
}

}  // namespace strata::x86::avx2
