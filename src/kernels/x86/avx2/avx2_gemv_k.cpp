// AVX2 one-token products (decode) for the K-quants against Q8_K activations, for CPUs without
// AVX-512: y[r] = W_r · x, rows in groups of 4 that share the activation loads, each group
// prefetching the rows two groups below.
//
// Products as the AVX2 K tiles: VPMADDUBSW (unsigned quants × signed activations, pairs fit
// int16) then VPMADDWD against the sub-block scale as int16 (spread by VPSHUFB from the row's 8 or
// 16 scales) into one int32 accumulator per row whose lanes sum to exactly the vec_dot's sumi
// (Q6_K's −32 offset enters as −32·sc_j·bsums_j; Q4_K's mins meet Q8_K's bsums summed per 32). At
// the end of a super-block the 4 rows are reduced together and the f32 scaling runs on the 4
// rows at once in the vec_dot's exact operation order, so every output is bit-identical to
// vec_dot (scalar and SIMD) and to the K tiles: decode and prefill agree to the bit.
// No FMA contraction: the f32 scaling must round exactly as the scalar reference does.
#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>

#include <cstring>

#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx2 {
namespace {

constexpr int kRows = 4;  // rows per group (the f32 scaling runs on 4 lanes)
constexpr int kPrefetchGroups = 2;

inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
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

// Lane r = Σ lanes of a_r.
inline __m128i sum_rows(__m256i a0, __m256i a1, __m256i a2, __m256i a3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// The 4 rows' fp16 pairs at byte offset off of their blocks (row r at b[r]) → f32 lanes
// [p0.lo, p1.lo, p2.lo, p3.lo | p0.hi, p1.hi, p2.hi, p3.hi].
inline __m256 f16_pairs(const uint8_t* const (&b)[kRows], size_t off) {
  uint32_t v[kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) std::memcpy(&v[r], b[r] + off, 4);
  const __m256 f = _mm256_cvtph_ps(_mm_setr_epi32(static_cast<int>(v[0]), static_cast<int>(v[1]),
                                                  static_cast<int>(v[2]), static_cast<int>(v[3])));
  return _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
}

// Q4_K's 12 packed bytes → 8 scales and 8 mins as int16 (layout in quant/q4_k_scales.h).
inline void q4_k_scales_mins(const uint8_t* s, __m128i* sc, __m128i* m) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint64_t sc8 = (a & 0x3f3f3f3fu) | static_cast<uint64_t>((c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u))
                                               << 32;
  const uint64_t m8 =
      (b & 0x3f3f3f3fu) | static_cast<uint64_t>(((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u)) << 32;
  *sc = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc8)));
  *m = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m8)));
}

// VPSHUFB control: every int16 lane ← int16 lane j0 (low 128 bits) / j1 (high) of its half.
inline __m256i pick_words(int j0, int j1) {
  auto word = [](int j) { return _mm_set1_epi16(static_cast<int16_t>((2 * j + 1) << 8 | (2 * j))); };
  return _mm256_set_m128i(word(j1), word(j0));
}

template <int R>
void rows_q4_k(int64_t nb, const uint8_t* w, size_t ws, const BlockQ8_K* x, float* y) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m128 sum = _mm_setzero_ps();
  const size_t pf = static_cast<size_t>(kPrefetchGroups * kRows) * ws;
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K& xb = x[i];
    // bsums summed per 32-element sub-block: 8 int16.
    const __m256i s32 = _mm256_madd_epi16(load256(xb.bsums), _mm256_set1_epi16(1));
    const __m128i bp = _mm_packs_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    const uint8_t* b[kRows];
    __m256i acc[kRows];
    __m128i mp[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      b[r] = w + static_cast<size_t>(r < R ? r : 0) * ws + static_cast<size_t>(i) * sizeof(BlockQ4_K);
      acc[r] = _mm256_setzero_si256();
      mp[r] = _mm_setzero_si128();
      if (r >= R) continue;
      prefetch_lines<3>(b[r] + pf);
      const BlockQ4_K& wb = *reinterpret_cast<const BlockQ4_K*>(b[r]);
      __m128i sc, m;
      q4_k_scales_mins(wb.scales, &sc, &m);
      mp[r] = _mm_madd_epi16(m, bp);  // 4 partials of Σ_j m_j·(bsums_2j + bsums_2j+1)
      const __m256i s = _mm256_broadcastsi128_si256(sc);
      __m256i a = acc[r];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i q = load256(wb.qs + 32 * c);
        const __m256i lo = _mm256_and_si256(q, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(xb.qs + 64 * c)),
                                               _mm256_shuffle_epi8(s, pick_words(2 * c, 2 * c)));
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(xb.qs + 64 * c + 32)),
                                               _mm256_shuffle_epi8(s, pick_words(2 * c + 1, 2 * c + 1)));
        a = _mm256_add_epi32(a, _mm256_add_epi32(p_lo, p_hi));
      }
      acc[r] = a;
    }
    const __m128i sumi = sum_rows(acc[0], acc[1], acc[2], acc[3]);
    const __m128i summ = _mm_hadd_epi32(_mm_hadd_epi32(mp[0], mp[1]), _mm_hadd_epi32(mp[2], mp[3]));
    // [d | dmin] per row times x's d, times [sumi | summ]: the vec_dot's d·sumi and dmin·summ.
    const __m256 dd = _mm256_mul_ps(f16_pairs(b, 0), _mm256_set1_ps(xb.d));
    const __m256 t = _mm256_mul_ps(dd, _mm256_cvtepi32_ps(_mm256_set_m128i(summ, sumi)));
    sum = _mm_add_ps(sum, _mm_sub_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  alignas(16) float out[4];
  _mm_store_ps(out, sum);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[r] = out[r];
}

template <int R>
void rows_q6_k(int64_t nb, const uint8_t* w, size_t ws, const BlockQ8_K* x, float* y) {
  __m128 sum = _mm_setzero_ps();
  const size_t pf = static_cast<size_t>(kPrefetchGroups * kRows) * ws;
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K& xb = x[i];
    const __m256i bs = load256(xb.bsums);
    __m256i acc[kRows];
    uint16_t dw[kRows] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      acc[r] = _mm256_setzero_si256();
      if (r >= R) continue;
      const uint8_t* b = w + static_cast<size_t>(r) * ws + static_cast<size_t>(i) * sizeof(BlockQ6_K);
      prefetch_lines<4>(b + pf);
      const BlockQ6_K& wb = *reinterpret_cast<const BlockQ6_K*>(b);
      dw[r] = wb.d;
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales)));
      // q − 32 through the block sums: −32·Σ_j sc_j·bsums_j seeds the accumulator.
      __m256i a = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5)), bs);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load256(wb.ql + 64 * h), ql1 = load256(wb.ql + 64 * h + 32);
        const __m256i qh = load256(wb.qh + 32 * h);
        // The half's 8 scales in both 128-bit lanes: quants 32g..32g+15 take scale 2g (low lane),
        // 32g+16..32g+31 scale 2g + 1 (high lane).
        const __m256i sch = _mm256_permute2x128_si256(sc16, sc16, h == 0 ? 0x00 : 0x11);
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          const __m256i q = q6k_quants32(ql0, ql1, qh, g);
          const __m256i s = _mm256_shuffle_epi8(sch, pick_words(2 * g, 2 * g + 1));
          const __m256i p = _mm256_maddubs_epi16(q, load256(xb.qs + 128 * h + 32 * g));
          a = _mm256_add_epi32(a, _mm256_madd_epi16(p, s));
        }
      }
      acc[r] = a;
    }
    const __m128i sumi = sum_rows(acc[0], acc[1], acc[2], acc[3]);
    uint64_t bits;
    std::memcpy(&bits, dw, 8);
    const __m128 d =
        _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits))), _mm_set1_ps(xb.d));
    sum = _mm_add_ps(sum, _mm_mul_ps(d, _mm_cvtepi32_ps(sumi)));
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

}  // namespace strata::x86::avx2
