// Building blocks of the AVX-512 row panels (avx512_gemm_panel.cpp, avx512_gemm_panel_k.cpp):
// 16 weight rows transposed so that lane l holds row l, and the prefetch of a row group's K chunk.
// Include only from files compiled with the AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace strata::x86::avx512::panel {

constexpr int kRows = 16;  // rows per panel (one zmm of lanes)

inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}

// 16 × 16-byte rows (row l at p[l] + off) → 4 registers, R_k lane l = dword k of row l.
[[gnu::always_inline]] inline void transpose16x4(const uint8_t* const* p, __m512i* r, size_t off = 0) {
  __m512i z[4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[g] + off)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[g + 4] + off)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[g + 8] + off)), 2);
    z[g] = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[g + 12] + off)), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  r[0] = _mm512_unpacklo_epi64(t0, t2);
  r[1] = _mm512_unpackhi_epi64(t0, t2);
  r[2] = _mm512_unpacklo_epi64(t1, t3);
  r[3] = _mm512_unpackhi_epi64(t1, t3);
}

// 16 × 32-byte rows (at p[l] + off) → 8 registers, R_k lane l = dword k of row l.
[[gnu::always_inline]] inline void transpose16x8(const uint8_t* const* p, __m512i* r, size_t off = 0) {
  // z[g] = [row g | row g+4] for g < 4, z[4+g] = [row 8+g | row 12+g] (256-bit halves), so the
  // final lane shuffle lands rows in natural order.
  __m512i z[8];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    z[g] = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[g] + off))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[g + 4] + off)), 1);
    z[4 + g] = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[g + 8] + off))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[g + 12] + off)), 1);
  }
  __m512i u[8];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m512i* zh = z + 4 * h;
    const __m512i t0 = _mm512_unpacklo_epi32(zh[0], zh[1]), t1 = _mm512_unpackhi_epi32(zh[0], zh[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(zh[2], zh[3]), t3 = _mm512_unpackhi_epi32(zh[2], zh[3]);
    u[4 * h + 0] = _mm512_unpacklo_epi64(t0, t2);  // 128-bit lanes: dword 0 | dword 4 | ...
    u[4 * h + 1] = _mm512_unpackhi_epi64(t0, t2);
    u[4 * h + 2] = _mm512_unpacklo_epi64(t1, t3);
    u[4 * h + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88);
    r[4 + k] = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xDD);
  }
}

// Prefetch into L1 the bytes [off, off + len) of rows [r0, r1) (a call's first row group; later
// groups are prefetched while the previous one is packed: 16 interleaved row streams defeat the
// hardware prefetchers, and prefetches never fault, past nr included).
inline void prefetch_rows(const void* w, size_t ws, int64_t r0, int64_t r1, size_t off, size_t len) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* p = at(w, static_cast<size_t>(r) * ws + off);
    for (size_t b = 0; b < len; b += 64) _mm_prefetch(reinterpret_cast<const char*>(p + b), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + len - 1), _MM_HINT_T0);
  }
}

// The row group at r0's pointers for a call of nr rows: rows past nr repeat the last one, so a
// partial group reads only its own rows (their lanes are masked off at the store).
inline void group_rows(const void* w, size_t ws, int64_t r0, int rows, const uint8_t** rp) {
  for (int l = 0; l < kRows; ++l) rp[l] = at(w, static_cast<size_t>(r0 + (l < rows ? l : rows - 1)) * ws);
}

}  // namespace strata::x86::avx512::panel
