// AVX-512 one-token products (decode) for the K-quants against Q8_K activations: y[r] = W_r · x,
// rows in groups of 4 that share every activation load, each group prefetching the rows two
// groups below (as avx512_gemv.cpp).
//
// Q4_K: a row's 128 quant bytes load as two 64-byte registers (chunks 2k and 2k+1 of 32 bytes);
// their low nibbles meet activations [x 128k..+31 | x 128k+64..+95] and their high nibbles
// [x 128k+32..+63 | x 128k+96..+127], assembled once per group. VPDPBUSD (unsigned nibble ×
// signed x) gives int32 sums of 4 products (|s| <= 4·15·128, an int16), packed by VPACKSSDW two
// registers at a time into int16 lanes of four sub-blocks, then VPDPWSSD against those sub-blocks'
// scales as int16 (placed by VPERMW) into one int32 accumulator per row whose lanes sum to exactly
// the vec_dot's sumi: 8 port-0 operations per row and super-block where VPMADDUBSW + VPDPWSSD
// took 10. The mins meet Q8_K's bsums (summed per 32) in one VPMADDWD for the 4 rows.
// Q6_K: 64 quants per register as the Q6_K tile, the same VPDPBUSD + VPACKSSDW + VPDPWSSD chain
// (|s| <= 4·63·128 still fits int16), the −32 offset through −32·sc_j·bsums_j.
// At the end of a super-block the 4 rows' sums are reduced together and the f32 scaling runs on
// the 4 rows at once in the vec_dot's exact operation order, so every output is bit-identical to
// vec_dot (scalar and SIMD) and to the K tiles: decode and prefill agree to the bit.
// No FMA contraction: the f32 scaling must round exactly as the scalar reference does.
#pragma GCC optimize("fp-contract=off")
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

constexpr int kRows = 4;  // rows per group (the f32 scaling runs on 4 lanes)
constexpr int kPrefetchGroups = 2;

inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m512i join(const void* lo, const void* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(lo)), load256(hi), 1);
}
inline void prefetch(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}
// Every cache line of [p, p + bytes) for bytes <= 64·lines, p anywhere.
template <int Lines>
inline void prefetch_lines(const uint8_t* p) {
#pragma GCC unroll 4
  for (int l = 0; l < Lines; ++l) prefetch(p + 64 * l);
}

// a_r (r < 4) → quarter r holds 4 partial sums of a_r.
inline __m512i fold4(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
  const __m512i s01 =
      _mm512_add_epi32(_mm512_shuffle_i64x2(a0, a1, 0x44), _mm512_shuffle_i64x2(a0, a1, 0xEE));
  const __m512i s23 =
      _mm512_add_epi32(_mm512_shuffle_i64x2(a2, a3, 0x44), _mm512_shuffle_i64x2(a2, a3, 0xEE));
  return _mm512_add_epi32(_mm512_shuffle_i64x2(s01, s23, 0x88), _mm512_shuffle_i64x2(s01, s23, 0xDD));
}
// f, g with quarter r holding 4 partials of row r → lane r: Σ of f's quarter r, lane 4 + r: Σ of
// g's quarter r.
inline __m256i sum_quarters2(__m512i f, __m512i g) {
  const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(f, g), _mm512_unpackhi_epi32(f, g));
  const __m512i v = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));  // [Σf, Σg, Σf, Σg]
  const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(pick, v));
}

// The 4 rows' Q4_K block headers (d, dmin and the 12 packed scale bytes: 16 bytes, row r in
// quarter r) decoded together: s / m quarter r = row r's 8 scales / 8 mins as int16, dd = [d_r |
// dmin_r] as f32 (f16_pairs' layout). Scales and mins as quant/q4_k_scales.h packs them, four at
// a time in 32-bit words: sub-blocks 0..3 are the low 6 bits of scale bytes 0..3 / 4..7; 4..7 take
// their low 4 bits from bytes 8..11 and their top 2 from bits 6..7 of bytes 0..3 / 4..7.
struct Q4kHeads {
  __m512i s, m;
  __m256 dd;
};
inline Q4kHeads q4_k_heads(const uint8_t* const (&b)[kRows]) {
  auto load128 = [](const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  __m512i h = _mm512_castsi128_si512(load128(b[0]));
  h = _mm512_inserti32x4(h, load128(b[1]), 1);
  h = _mm512_inserti32x4(h, load128(b[2]), 2);
  h = _mm512_inserti32x4(h, load128(b[3]), 3);
  const __m512i a = _mm512_shuffle_epi32(h, _MM_PERM_BBBB);  // scale bytes 0..3
  const __m512i c = _mm512_shuffle_epi32(h, _MM_PERM_CCCC);  // 4..7
  const __m512i e = _mm512_shuffle_epi32(h, _MM_PERM_DDDD);  // 8..11
  const __m512i m3f = _mm512_set1_epi32(0x3f3f3f3f), m0f = _mm512_set1_epi32(0x0f0f0f0f);
  const __m512i m30 = _mm512_set1_epi32(0x30303030);
  const __m512i sc_hi =
      _mm512_or_si512(_mm512_and_si512(e, m0f), _mm512_and_si512(_mm512_srli_epi32(a, 2), m30));
  const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(e, 4), m0f),
                                       _mm512_and_si512(_mm512_srli_epi32(c, 2), m30));
  // Quarter dwords [scales 0..3, scales 4..7, mins 0..3, mins 4..7].
  __m512i sm = _mm512_mask_blend_epi32(0x2222, _mm512_and_si512(a, m3f), sc_hi);
  sm = _mm512_mask_blend_epi32(0x4444, sm, _mm512_and_si512(c, m3f));
  sm = _mm512_mask_blend_epi32(0x8888, sm, m_hi);
  // Bytes 0..7 / 8..15 of each quarter zero-extended to words.
  const __m512i to_s = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, -128, 1, -128, 2, -128, 3, -128, 4, -128, 5, -128, 6, -128, 7, -128));
  const __m512i to_m = _mm512_broadcast_i32x4(
      _mm_setr_epi8(8, -128, 9, -128, 10, -128, 11, -128, 12, -128, 13, -128, 14, -128, 15, -128));
  const __m512i dword0 = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256 f = _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(dword0, h)));
  return {_mm512_shuffle_epi8(sm, to_s), _mm512_shuffle_epi8(sm, to_m),
          _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7))};
}

// VPERMW indices into the 4 rows' scales (row r's 8 words at 8r) for VPACKSSDW(a, b) of the
// VPDPBUSD results a (sub-blocks j0 in lanes 0..7, j0 + 2 in 8..15) and b (j0 + 1, j0 + 3): word w of
// 128-bit lane L is a's dword 4L + w (w < 4) or b's dword 4L + w − 4, so its sub-block is j0 +
// (L >= 2 ? 2 : 0) + (w >= 4 ? 1 : 0).
inline __m512i pack_scale_idx(int row, int j0) {
  alignas(64) int16_t idx[32];
  for (int l = 0; l < 32; ++l)
    idx[l] = static_cast<int16_t>(8 * row + j0 + (l / 8 >= 2 ? 2 : 0) + (l % 8 >= 4 ? 1 : 0));
  return _mm512_load_si512(idx);
}

// Rows w + r·ws (r < R <= 4) from super-block 0 to nb; y[r] = results.
template <int R>
void rows_q4_k(int64_t nb, const uint8_t* w, size_t ws, const BlockQ8_K* x, float* y) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i ones16 = _mm512_set1_epi16(1);
  // Register k (bytes 64k..64k+63): low nibbles are sub-blocks 4k, 4k+2; high nibbles 4k+1, 4k+3.
  __m512i sidx[kRows][2];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) sidx[r][0] = pack_scale_idx(r, 0), sidx[r][1] = pack_scale_idx(r, 4);
  const __m512i zero = _mm512_setzero_si512();
  __m128 sum = _mm_setzero_ps();
  const size_t pf = static_cast<size_t>(kPrefetchGroups * kRows) * ws;
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K& xb = x[i];
    const __m512i xlo0 = join(xb.qs, xb.qs + 64), xhi0 = join(xb.qs + 32, xb.qs + 96);
    const __m512i xlo1 = join(xb.qs + 128, xb.qs + 192), xhi1 = join(xb.qs + 160, xb.qs + 224);
    // bsums summed per 32-element sub-block (8 int16), in every quarter.
    const __m256i s32 = _mm256_madd_epi16(load256(xb.bsums), _mm512_castsi512_si256(ones16));
    const __m512i bp = _mm512_broadcast_i32x4(
        _mm_packs_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1)));
    const uint8_t* b[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r)
      b[r] = w + static_cast<size_t>(r < R ? r : 0) * ws + static_cast<size_t>(i) * sizeof(BlockQ4_K);
    const Q4kHeads hd = q4_k_heads(b);
    __m512i acc[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      acc[r] = _mm512_setzero_si512();
      if (r >= R) continue;
      prefetch_lines<3>(b[r] + pf);
      const BlockQ4_K& wb = *reinterpret_cast<const BlockQ4_K*>(b[r]);
      const __m512i q0 = _mm512_loadu_si512(wb.qs), q1 = _mm512_loadu_si512(wb.qs + 64);
      const __m512i d0 = _mm512_dpbusd_epi32(zero, _mm512_and_si512(q0, low4), xlo0);
      const __m512i d1 = _mm512_dpbusd_epi32(zero, _mm512_and_si512(_mm512_srli_epi16(q0, 4), low4), xhi0);
      const __m512i d2 = _mm512_dpbusd_epi32(zero, _mm512_and_si512(q1, low4), xlo1);
      const __m512i d3 = _mm512_dpbusd_epi32(zero, _mm512_and_si512(_mm512_srli_epi16(q1, 4), low4), xhi1);
      const __m512i a =
          _mm512_dpwssd_epi32(acc[r], _mm512_packs_epi32(d0, d1), _mm512_permutexvar_epi16(sidx[r][0], hd.s));
      acc[r] = _mm512_dpwssd_epi32(a, _mm512_packs_epi32(d2, d3), _mm512_permutexvar_epi16(sidx[r][1], hd.s));
    }
    // Lanes 0..3: sumi per row, 4..7: summ per row (quarter r of madd: 4 partials of row r).
    const __m256i sums = sum_quarters2(fold4(acc[0], acc[1], acc[2], acc[3]), _mm512_madd_epi16(hd.m, bp));
    // [d | dmin] per row times x's d, times [sumi | summ]: the vec_dot's d·sumi and dmin·summ.
    const __m256 dd = _mm256_mul_ps(hd.dd, _mm256_set1_ps(xb.d));
    const __m256 t = _mm256_mul_ps(dd, _mm256_cvtepi32_ps(sums));
    sum = _mm_add_ps(sum, _mm_sub_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  alignas(16) float out[4];
  _mm_store_ps(out, sum);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[r] = out[r];
}

template <int R>
void rows_q6_k(int64_t nb, const uint8_t* w, size_t ws, const BlockQ8_K* x, float* y) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03);
  const __m512i zero = _mm512_setzero_si512();
  // VPACKSSDW(a, b) of half h's VPDPBUSD results a (quants 0..63: sub-blocks 8h + l/4 in dword l)
  // and b (quants 64..127: 8h + 4 + l/4): word w of 128-bit lane L is of sub-block 8h + L + (w >= 4 ?
  // 4 : 0); VPERMW indices into the 16 scales.
  __m512i sidx[2];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    alignas(64) int16_t idx[32];
    for (int l = 0; l < 32; ++l) idx[l] = static_cast<int16_t>(8 * h + l / 8 + (l % 8 >= 4 ? 4 : 0));
    sidx[h] = _mm512_load_si512(idx);
  }
  __m128 sum = _mm_setzero_ps();
  const size_t pf = static_cast<size_t>(kPrefetchGroups * kRows) * ws;
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K& xb = x[i];
    const __m512i bs = _mm512_zextsi256_si512(load256(xb.bsums));
    const __m512i xq[4] = {_mm512_loadu_si512(xb.qs), _mm512_loadu_si512(xb.qs + 64),
                           _mm512_loadu_si512(xb.qs + 128), _mm512_loadu_si512(xb.qs + 192)};
    const uint8_t* b[kRows];
    __m512i acc[kRows];
    uint16_t dw[kRows] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      b[r] = w + static_cast<size_t>(r < R ? r : 0) * ws + static_cast<size_t>(i) * sizeof(BlockQ6_K);
      acc[r] = _mm512_setzero_si512();
      if (r >= R) continue;
      prefetch_lines<4>(b[r] + pf);
      const BlockQ6_K& wb = *reinterpret_cast<const BlockQ6_K*>(b[r]);
      dw[r] = wb.d;
      const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales)));
      const __m512i sc = _mm512_castsi256_si512(s16);
      // q − 32 through the block sums: −32·Σ_j sc_j·bsums_j seeds the accumulator.
      const __m512i neg32 =
          _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s16, 5)));
      __m512i a = _mm512_dpwssd_epi32(acc[r], neg32, bs);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i ql = _mm512_loadu_si512(wb.ql + 64 * h);
        const __m256i qh = load256(wb.qh + 32 * h);
        // Quants 0..63 of the half: low nibbles with qh bits 0-1 / 2-3; 64..127: high nibbles
        // with bits 4-5 / 6-7 (quant/q6_k.cpp's layout).
        const __m512i qh_a = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
        const __m512i qh_b =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(qh, 4)), _mm256_srli_epi16(qh, 6), 1);
        const __m512i qa =
            _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_slli_epi16(_mm512_and_si512(qh_a, low2), 4));
        const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                           _mm512_slli_epi16(_mm512_and_si512(qh_b, low2), 4));
        const __m512i da = _mm512_dpbusd_epi32(zero, qa, xq[2 * h]);
        const __m512i db = _mm512_dpbusd_epi32(zero, qb, xq[2 * h + 1]);
        a = _mm512_dpwssd_epi32(a, _mm512_packs_epi32(da, db), _mm512_permutexvar_epi16(sidx[h], sc));
      }
      acc[r] = a;
    }
    const __m256i sums = sum_quarters2(fold4(acc[0], acc[1], acc[2], acc[3]), _mm512_setzero_si512());
    uint64_t bits;
    std::memcpy(&bits, dw, 8);
    const __m128 d =
        _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits))), _mm_set1_ps(xb.d));
    sum = _mm_add_ps(sum, _mm_mul_ps(d, _mm_cvtepi32_ps(_mm256_castsi256_si128(sums))));
  }
  alignas(16) float out[4];
  _mm_store_ps(out, sum);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[r] = out[r];
}

using RowsFn = void (*)(int64_t, const uint8_t*, size_t, const BlockQ8_K*, float*);

// Groups of 4 rows, then the last nr % 4 in one call.
void gemv_groups(const RowsFn (&f)[kRows + 1], int64_t n, const void* w, size_t ws, int64_t nr, const void* x,
                 float* y) {
  const int64_t nb = n / QK_K;
  const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x);
  int64_t r = 0;
  for (; r + kRows <= nr; r += kRows) f[kRows](nb, at(w, static_cast<size_t>(r) * ws), ws, xb, y + r);
  if (r < nr) f[nr - r](nb, at(w, static_cast<size_t>(r) * ws), ws, xb, y + r);
}

}  // namespace

void gemv_q4_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  static constexpr RowsFn f[] = {nullptr, rows_q4_k<1>, rows_q4_k<2>, rows_q4_k<3>, rows_q4_k<4>};
  gemv_groups(f, n, w, ws, nr, x, y);
}

void gemv_q6_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  static constexpr RowsFn f[] = {nullptr, rows_q6_k<1>, rows_q6_k<2>, rows_q6_k<3>, rows_q6_k<4>};
  gemv_groups(f, n, w, ws, nr, x, y);
}

}  // namespace strata::x86::avx512
