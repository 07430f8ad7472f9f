// AVX2 register tiles for the K-quants against Q8_K activations (kernels/traits.h GemmTileFn),
// for CPUs without AVX-512: up to 4 weight rows × 4 tokens per call, run as passes of up to 2
// tokens (8 int32 accumulators in 16 registers). Per 256-element super-block each row's scales
// (and Q4_K mins) are decoded once per pass and its quants once per pass, shared by the tokens.
//
// Products: VPMADDUBSW (unsigned quants × signed activations, pairs fit int16) then VPMADDWD
// against the sub-block scale as int16, added into one int32 accumulator per (row, token) whose
// lanes sum to exactly the vec_dot's sumi (Q6_K's −32 offset enters as −32·sc_j·bsums_j). At the
// end of a super-block the 8 accumulators are reduced together (lane 4t + r) and the f32 scaling
// runs on 8 (row, token) pairs per instruction in the vec_dot's exact operation order, so every
// output is bit-identical to vec_dot (scalar and SIMD), as avx512_gemm_k.cpp.
// No FMA contraction: the f32 scaling must round exactly as the scalar reference does.
#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>

#include <cstring>

#include "kernels/traits.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/tile_table.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx2 {
namespace {

constexpr int kPassTokens = 2;

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}

// acc[r][t] (4 rows × 2 tokens of 8 int32 lanes) → lane 4t + r = Σ lanes of acc[r][t].
inline __m256i sum4x2(const __m256i (&acc)[4][2]) {
  __m256i h[2];
  for (int t = 0; t < 2; ++t) {
    // [r0 0-3, r1 0-3, r2 0-3, r3 0-3 | r0 4-7, r1 4-7, r2 4-7, r3 4-7]
    h[t] =
        _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0][t], acc[1][t]), _mm256_hadd_epi32(acc[2][t], acc[3][t]));
  }
  return _mm256_add_epi32(_mm256_permute2x128_si256(h[0], h[1], 0x20),
                          _mm256_permute2x128_si256(h[0], h[1], 0x31));
}
// u[r] with lanes [t0: 4 partials | t1: 4 partials] → lane 4t + r = Σ of u[r]'s t partials.
inline __m256i sum_rows(const __m256i (&u)[4]) {
  return _mm256_hadd_epi32(_mm256_hadd_epi32(u[0], u[1]), _mm256_hadd_epi32(u[2], u[3]));
}

// Lane 4t + r = h2f(h[r]).
inline __m256 by_row_f16(const uint16_t (&h)[4]) {
  uint64_t bits;
  std::memcpy(&bits, h, 8);
  const __m128 v = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
  return _mm256_set_m128(v, v);
}
// Lane 4t + r = dx[t].
inline __m256 by_token(const float (&dx)[2]) {
  return _mm256_set_m128(_mm_set1_ps(dx[1]), _mm_set1_ps(dx[0]));
}

template <int R, int T>
inline void store_pass(__m256 sum, float* const* y) {
  alignas(32) float out[8];
  _mm256_store_ps(out, sum);
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) y[t][r] = out[4 * t + r];
}

// Q4_K's 12 packed bytes → 8 scales and 8 mins, four at a time in 32-bit words (as
// avx512_gemm_k.cpp; layout in quant/q4_k_scales.h).
inline void q4_k_scales_mins(const uint8_t* s, uint8_t sc[8], uint8_t m[8]) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint32_t w[4] = {a & 0x3f3f3f3fu, (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u), b & 0x3f3f3f3fu,
                         ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u)};
  std::memcpy(sc, w, 8);
  std::memcpy(m, w + 2, 8);
}

template <int R, int T>
void pass_q4_k(int64_t n, const void* w, size_t ws, const void* const* x, float* const* y) {
  const int64_t nb = n / QK_K;
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones16 = _mm256_set1_epi16(1);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K* xb[2];
    __m128i bp[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
    float dx[2] = {0, 0};
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      xb[t] = static_cast<const BlockQ8_K*>(x[t]) + i;
      // bsums summed per 32-element sub-block: 8 int16.
      const __m256i s32 = _mm256_madd_epi16(load256(xb[t]->bsums), ones16);
      bp[t] = _mm_packs_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
      dx[t] = xb[t]->d;
    }
    const __m256i bpair = _mm256_set_m128i(bp[1], bp[0]);
    __m256i acc[4][2], mprod[4];
    uint16_t dw[4] = {0, 0, 0, 0}, dmw[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      acc[r][0] = acc[r][1] = mprod[r] = _mm256_setzero_si256();
      if (r >= R) continue;
      const BlockQ4_K& wb = reinterpret_cast<const BlockQ4_K*>(at(w, r * ws))[i];
      uint8_t sc[8], m[8];
      q4_k_scales_mins(wb.scales, sc, m);
      uint64_t m8;
      std::memcpy(&m8, m, 8);
      const __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m8)));
      // [t0: 4 partials of Σ_j m_j·bp_j | t1: 4 partials]
      mprod[r] = _mm256_madd_epi16(bpair, _mm256_set_m128i(m16, m16));
      dw[r] = wb.d;
      dmw[r] = wb.dmin;
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i q = load256(wb.qs + 32 * c);
        const __m256i lo = _mm256_and_si256(q, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        const __m256i s_lo = _mm256_set1_epi16(sc[2 * c]), s_hi = _mm256_set1_epi16(sc[2 * c + 1]);
#pragma GCC unroll 2
        for (int t = 0; t < T; ++t) {
          const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(xb[t]->qs + 64 * c)), s_lo);
          const __m256i p_hi =
              _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(xb[t]->qs + 64 * c + 32)), s_hi);
          acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_add_epi32(p_lo, p_hi));
        }
      }
    }
    const __m256i sumi = sum4x2(acc);
    const __m256i summ = sum_rows(mprod);
    const __m256 dxv = by_token(dx);
    const __m256 d = _mm256_mul_ps(by_row_f16(dw), dxv);
    const __m256 dmin = _mm256_mul_ps(by_row_f16(dmw), dxv);
    sum = _mm256_add_ps(sum, _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi)),
                                           _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summ))));
  }
  store_pass<R, T>(sum, y);
}

template <int R, int T>
void pass_q6_k(int64_t n, const void* w, size_t ws, const void* const* x, float* const* y) {
  const int64_t nb = n / QK_K;
  // Scale vector g of a half: int16 scale 2g in the low 128 bits, 2g + 1 in the high (from the
  // half's 8 scales as int16, repeated in both 128-bit lanes).
  __m256i pick[4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const char lo0 = static_cast<char>(4 * g), lo1 = static_cast<char>(4 * g + 1);
    const char hi0 = static_cast<char>(4 * g + 2), hi1 = static_cast<char>(4 * g + 3);
    pick[g] =
        _mm256_setr_epi8(lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, hi0,
                         hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1);
  }
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K* xb[2];
    __m256i bs[2];
    float dx[2] = {0, 0};
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      xb[t] = static_cast<const BlockQ8_K*>(x[t]) + i;
      bs[t] = load256(xb[t]->bsums);
      dx[t] = xb[t]->d;
    }
    __m256i acc[4][2];
    uint16_t dw[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      acc[r][0] = acc[r][1] = _mm256_setzero_si256();
      if (r >= R) continue;
      const BlockQ6_K& wb = reinterpret_cast<const BlockQ6_K*>(at(w, r * ws))[i];
      dw[r] = wb.d;
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales)));
      // q − 32 through the block sums: −32·Σ_j sc_j·bsums_j seeds the accumulator.
      const __m256i neg32 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_madd_epi16(neg32, bs[t]);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load256(wb.ql + 64 * h), ql1 = load256(wb.ql + 64 * h + 32);
        const __m256i qh = load256(wb.qh + 32 * h);
        const __m256i sch = _mm256_permute2x128_si256(sc16, sc16, h == 0 ? 0x00 : 0x11);
        // Quants 32g..32g+31 of the half (quant/q6_k.cpp's layout), unsigned 6-bit.
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          const __m256i q = q6k_quants32(ql0, ql1, qh, g);
          const __m256i s = _mm256_shuffle_epi8(sch, pick[g]);
#pragma GCC unroll 2
          for (int t = 0; t < T; ++t) {
            const __m256i p = _mm256_maddubs_epi16(q, load256(xb[t]->qs + 128 * h + 32 * g));
            acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(p, s));
          }
        }
      }
    }
    const __m256i sumi = sum4x2(acc);
    const __m256 d = _mm256_mul_ps(by_row_f16(dw), by_token(dx));
    sum = _mm256_add_ps(sum, _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi)));
  }
  store_pass<R, T>(sum, y);
}

template <int R, int T>
struct Q4K {
  static constexpr TileFn f = pass_q4_k<R, T>;
};
template <int R, int T>
struct Q6K {
  static constexpr TileFn f = pass_q6_k<R, T>;
};

static_assert(kGemmTileRows == 4, "passes are 4 rows × 2 tokens (lane 4t + r)");

}  // namespace

void gemm_q4_k_q8_k(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y) {
  run_in_passes<Q4K, kPassTokens>(n, w, ws, nr, x, nt, y);
}
void gemm_q6_k_q8_k(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y) {
  run_in_passes<Q6K, kPassTokens>(n, w, ws, nr, x, nt, y);
}

}  // namespace strata::x86::avx2
