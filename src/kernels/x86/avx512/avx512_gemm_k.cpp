// AVX-512 register tiles for the K-quants against Q8_K activations: up to 4 weight rows × 4
// activation rows per call (kernels/traits.h GemmTileFn). Per 256-element super-block each row's
// scales (and Q4_K mins) are decoded once and its quants once, then reused by every token.
//
// Products: VPMADDUBSW (unsigned quants × signed activations, pairs fit int16) then VPDPWSSD
// against the sub-block scales as int16, so each (row, token) keeps one int32 accumulator per
// super-block whose lanes sum to exactly the vec_dot's sumi. Q6_K's −32 offset enters the same
// accumulator as −32·sc_j·bsums_j (one more VPDPWSSD). At the end of a super-block the 16
// accumulators are reduced together into one vector (lane 4t + r), and the f32 scaling
// (d·dx·sumi − dmin·dx·summ, Q4_K's mins from Q8_K's bsums) runs on 16 (row, token) pairs per
// instruction with the vec_dot's exact operation order. Integer sums are exact, so every output
// is bit-identical to vec_dot (scalar and SIMD): the tile only saves loads and decodes.
// No FMA contraction: the f32 scaling must round exactly as the scalar reference does.
#pragma GCC optimize("fp-contract=off")
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/tile_table.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Reducing 16 int32 accumulators acc[r][t] at once: fold4 over t gives, per row, a vector whose
// quarter t holds 4 partial sums of acc[r][t]; transpose_sum4 over the 4 rows then sums each
// quarter's partials into lane r of quarter t. Result: lane 4t + r = Σ lanes of acc[r][t].
inline __m512i fold4(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
  // → quarter k holds 4 int32 partial sums of a_k.
  const __m512i s01 =
      _mm512_add_epi32(_mm512_shuffle_i64x2(a0, a1, 0x44), _mm512_shuffle_i64x2(a0, a1, 0xEE));
  const __m512i s23 =
      _mm512_add_epi32(_mm512_shuffle_i64x2(a2, a3, 0x44), _mm512_shuffle_i64x2(a2, a3, 0xEE));
  return _mm512_add_epi32(_mm512_shuffle_i64x2(s01, s23, 0x88), _mm512_shuffle_i64x2(s01, s23, 0xDD));
}
// v_i (i = 0..3), each quarter q holding 4 partials → quarter q, lane i = Σ of v_i's quarter q.
inline __m512i transpose_sum4(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
  const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
  const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}
// acc[r][t] → lane 4t + r = Σ lanes of acc[r][t].
inline __m512i sum4x4(const __m512i (&acc)[4][4]) {
  return transpose_sum4(
      fold4(acc[0][0], acc[0][1], acc[0][2], acc[0][3]), fold4(acc[1][0], acc[1][1], acc[1][2], acc[1][3]),
      fold4(acc[2][0], acc[2][1], acc[2][2], acc[2][3]), fold4(acc[3][0], acc[3][1], acc[3][2], acc[3][3]));
}

// Lane 4t + r = v[t] (tokens' values spread over their quarter).
inline __m512 by_token(const float (&v)[4]) {
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_loadu_ps(v)));
}
// Lane 4t + r = h2f(h[r]) (rows' fp16 values repeated in every quarter).
inline __m512 by_row_f16(const uint16_t (&h)[4]) {
  uint64_t bits;
  std::memcpy(&bits, h, 8);
  return _mm512_broadcast_f32x4(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits))));
}

// Tile outputs: y[t][r] = lane 4t + r, for r < R, t < T.
template <int R, int T>
inline void store_tile(__m512 sum, float* const* y) {
  alignas(64) float out[16];
  _mm512_store_ps(out, sum);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) y[t][r] = out[4 * t + r];
}

// Q4_K's 12 packed bytes → 8 scales and 8 mins (6 bits each), four at a time in 32-bit words:
// sub-blocks 0..3 are the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); sub-blocks 4..7 take
// their low 4 bits from bytes 8..11 and their top 2 from the spare bits 6..7 of bytes 0..3 / 4..7.
inline void q4_k_scales_mins(const uint8_t* s, uint64_t* sc, uint64_t* m) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint32_t sc_lo = a & 0x3f3f3f3fu, m_lo = b & 0x3f3f3f3fu;
  const uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
  const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
  *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  *m = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}
inline __m128i u8x8_to_i16(uint64_t v) {
  return _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(v)));
}

template <int R, int T>
void tile_q4_k(int64_t n, const void* w, size_t ws, const void* const* x, float* const* y) {
  const int64_t nb = n / QK_K;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i hi_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  // int16 lane i of chunk c's scale vector = scale of sub-block 2c + i/16.
  __m512i sidx[4];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c)
    sidx[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<int16_t>(2 * c))),
                                 _mm256_set1_epi16(static_cast<int16_t>(2 * c + 1)), 1);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ4_K* wb[4];
    const BlockQ8_K* xb[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wb[r] = reinterpret_cast<const BlockQ4_K*>(at(w, r * ws)) + i;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xb[t] = static_cast<const BlockQ8_K*>(x[t]) + i;

    // Token side: bsums summed per 32-element sub-block (8 int16) in quarter t; the scales.
    __m512i bpair = _mm512_setzero_si512();
    float dx[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i s32 = _mm256_madd_epi16(load256(xb[t]->bsums), ones16);
      const __m128i s16 = _mm_packs_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
      bpair = _mm512_inserti32x4(bpair, s16, t);
      dx[t] = xb[t]->d;
    }

    // Row side: scales as int16 (for the chunks' scale vectors), mins against the bsums.
    __m128i sc16[4];
    __m512i mprod[4];
    uint16_t dw[4] = {0, 0, 0, 0}, dmw[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      if (r >= R) {
        mprod[r] = _mm512_setzero_si512();
        continue;
      }
      uint64_t sc8, m8;
      q4_k_scales_mins(wb[r]->scales, &sc8, &m8);
      sc16[r] = u8x8_to_i16(sc8);
      // Quarter t: 4 partials of Σ_j m_j · (bsums_2j + bsums_2j+1) for token t.
      mprod[r] = _mm512_madd_epi16(bpair, _mm512_broadcast_i32x4(u8x8_to_i16(m8)));
      dw[r] = wb[r]->d;
      dmw[r] = wb[r]->dmin;
    }

    __m512i acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) acc[r][t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // 64 quants: low nibbles (sub-block 2c) then high nibbles (2c + 1) of 32 bytes.
        const __m512i q = _mm512_broadcast_i64x4(load256(wb[r]->qs + 32 * c));
        const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(q, hi_shift), low4);
        const __m512i s = _mm512_permutexvar_epi16(sidx[c], _mm512_castsi128_si512(sc16[r]));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m512i p = _mm512_maddubs_epi16(nib, _mm512_loadu_si512(xb[t]->qs + 64 * c));
          acc[r][t] = _mm512_dpwssd_epi32(acc[r][t], p, s);
        }
      }
    }
    const __m512i sumi = sum4x4(acc);
    const __m512i summ = transpose_sum4(mprod[0], mprod[1], mprod[2], mprod[3]);
    const __m512 dxv = by_token(dx);
    const __m512 d = _mm512_mul_ps(by_row_f16(dw), dxv);
    const __m512 dmin = _mm512_mul_ps(by_row_f16(dmw), dxv);
    sum = _mm512_add_ps(sum, _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi)),
                                           _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summ))));
  }
  store_tile<R, T>(sum, y);
}

template <int R, int T>
void tile_q6_k(int64_t n, const void* w, size_t ws, const void* const* x, float* const* y) {
  const int64_t nb = n / QK_K;
  const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03);
  // int16 lane i of scale vector g (64 quants = sub-blocks 4g..4g+3) = scale 4g + i/8.
  __m512i sidx[4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    alignas(64) int16_t idx[32];
    for (int l = 0; l < 32; ++l) idx[l] = static_cast<int16_t>(4 * g + l / 8);
    sidx[g] = _mm512_load_si512(idx);
  }
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ6_K* wb[4];
    const BlockQ8_K* xb[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wb[r] = reinterpret_cast<const BlockQ6_K*>(at(w, r * ws)) + i;
    __m512i bs[4];
    float dx[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      xb[t] = static_cast<const BlockQ8_K*>(x[t]) + i;
      bs[t] = _mm512_zextsi256_si512(load256(xb[t]->bsums));
      dx[t] = xb[t]->d;
    }
    __m512i acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) acc[r][t] = _mm512_setzero_si512();
    __m512i sc16[4];
    uint16_t dw[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i s =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[r]->scales)));
      sc16[r] = _mm512_castsi256_si512(s);
      // q − 32 through the block sums: −32·Σ_j sc_j·bsums_j seeds the accumulator.
      const __m512i neg32 =
          _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s, 5)));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_dpwssd_epi32(acc[r][t], neg32, bs[t]);
      dw[r] = wb[r]->d;
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i ql = _mm512_loadu_si512(wb[r]->ql + 64 * h);
        const __m256i qh = load256(wb[r]->qh + 32 * h);
        // Quants 0..63 of the half: low nibbles with qh bits 0-1 / 2-3; 64..127: high nibbles
        // with bits 4-5 / 6-7 (quant/q6_k.cpp's layout).
        const __m512i qh_a = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
        const __m512i qh_b =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(qh, 4)), _mm256_srli_epi16(qh, 6), 1);
        const __m512i qa =
            _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_slli_epi16(_mm512_and_si512(qh_a, low2), 4));
        const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                           _mm512_slli_epi16(_mm512_and_si512(qh_b, low2), 4));
        const __m512i sa = _mm512_permutexvar_epi16(sidx[2 * h], sc16[r]);
        const __m512i sb = _mm512_permutexvar_epi16(sidx[2 * h + 1], sc16[r]);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m512i pa = _mm512_maddubs_epi16(qa, _mm512_loadu_si512(xb[t]->qs + 128 * h));
          const __m512i pb = _mm512_maddubs_epi16(qb, _mm512_loadu_si512(xb[t]->qs + 128 * h + 64));
          acc[r][t] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(acc[r][t], pa, sa), pb, sb);
        }
      }
    }
    const __m512i sumi = sum4x4(acc);
    const __m512 d = _mm512_mul_ps(by_row_f16(dw), by_token(dx));
    sum = _mm512_add_ps(sum, _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi)));
  }
  store_tile<R, T>(sum, y);
}

template <int R, int T>
struct Q4K {
  static constexpr TileFn f = tile_q4_k<R, T>;
};
template <int R, int T>
struct Q6K {
  static constexpr TileFn f = tile_q6_k<R, T>;
};

static_assert(kGemmTileRows == 4 && kGemmTileTokens == 4, "tiles are 4 rows × 4 tokens (lane 4t + r)");

}  // namespace

void gemm_q4_k_q8_k(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y) {
  pick_tile<Q4K, kGemmTileTokens>(nr, nt)(n, w, ws, x, y);
}
void gemm_q6_k_q8_k(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y) {
  pick_tile<Q6K, kGemmTileTokens>(nr, nt)(n, w, ws, x, y);
}

}  // namespace strata::x86::avx512
