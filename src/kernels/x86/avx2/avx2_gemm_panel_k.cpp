// AVX2 many-token products (KernelTraits::gemm_panel) for the K-quants against Q8_K activations,
// for CPUs without AVX-512: Q4_K and Q6_K, bit-identical to vec_dot.
//
// The AVX-512 K panels' layout (avx512_gemm_panel_k.cpp) at half width: lanes hold weight rows. A
// group of 8 rows is unpacked and transposed once per K chunk (4 super-blocks) into a panel — per
// super-block 64 registers of unsigned quants (lane l = row l's elements 4k..4k+3), the sub-block
// scales as int16 pairs per lane, Q4_K's mins as int16 pairs and the f32 super-block scales — and
// every token of the call reuses it. Without VNNI, a sub-block's products are VPMADDUBSW (unsigned
// quants × the token's activation dword broadcast to all lanes) whose int16 pair sums add in int16
// (bounds below), then one VPMADDWD against the scale pair (sc_j, sc_j) gives sc_j·Σ q·x in int32:
//   Q4_K  a 32-element sub-block = 8 dwords: |int16 slot| ≤ 8·2·15·128 = 30720;
//         summ = Σ_j m_j·(bsums_2j + bsums_2j+1) by VPMADDWD of (m_2k, m_2k+1) pairs.
//   Q6_K  a 16-element sub-block = 4 dwords as two int16 sums of two: |slot| ≤ 2·2·63·128 = 32256;
//         the −32 offset as −32·Σ_j sc_j·bsums_j (VPMADDWD of (sc_2k, sc_2k+1) pairs, then << 5).
// Every int32 sum is exact (wrapping adds, so their order is free) and equals vec_dot's sumi /
// summ; the f32 scaling per super-block follows vec_dot's operation order exactly
// (y += (d_w·d_x)·sumi − (dmin_w·d_x)·summ, super-blocks in order), so each output is
// bit-identical to the scalar vec_dot whatever nr, nt or the other rows and tokens of the call.
// Calls with fewer than kMinTokens tokens run the 4×4 tiles (avx2_gemm_k.cpp, also bit-identical):
// the 8-row unpack costs about one token's products.
// No FMA contraction: the f32 scaling must round exactly as the scalar reference does.
#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>

#include <algorithm>
#include <cstddef>

#include "kernels/traits.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/tile_table.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx2 {
namespace {

constexpr int kRows = 8;     // rows per panel (one ymm of int32 lanes)
constexpr int kChunkSB = 4;  // K chunk: super-blocks per panel (1024 elements; 2: ~4% slower at 64 tokens)

inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}
// Four activation bytes as one dword in every lane.
inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}
// An empty asm the value passes through: keeps each token's add chain a chain (GCC would
// reassociate the tile's chains into one tree of live products, spilled with 16 YMM).
inline void pin(__m256i& v) {
  asm("" : "+x"(v));
}

// 8 rows of 16 bytes (row l at p[l] + off) → 4 registers, R_k lane l = dword k of row l.
inline void transpose8x4(const uint8_t* const* p, size_t off, __m256i* r) {
  __m256i z[4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g)
    z[g] = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[g + 4] + off)),
                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[g] + off)));
  const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
  r[0] = _mm256_unpacklo_epi64(t0, t2);
  r[1] = _mm256_unpackhi_epi64(t0, t2);
  r[2] = _mm256_unpacklo_epi64(t1, t3);
  r[3] = _mm256_unpackhi_epi64(t1, t3);
}
// 32 bytes per row → 8 registers, R_k lane l = dword k of row l.
inline void transpose8x8(const uint8_t* const* p, size_t off, __m256i* r) {
  transpose8x4(p, off, r);
  transpose8x4(p, off + 16, r + 4);
}

// The fp16 at byte offset off of the 8 rows' super-block i → 8 f32 lanes.
template <class B>
inline __m256 f16x8(const uint8_t* const* rows, int64_t i, size_t off) {
  auto h = [&](int l) {
    uint16_t v;
    __builtin_memcpy(&v, rows[l] + static_cast<size_t>(i) * sizeof(B) + off, sizeof v);
    return static_cast<short>(v);
  };
  return _mm256_cvtph_ps(_mm_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7)));
}

// Byte b of every dword, zero-extended, in both int16 halves of the dword.
inline __m256i byte_pair(__m256i v, int b) {
  const __m256i x = _mm256_and_si256(_mm256_srli_epi32(v, 8 * b), _mm256_set1_epi32(0xff));
  return _mm256_or_si256(x, _mm256_slli_epi32(x, 16));
}
// Signed byte b of every dword in both int16 halves of the dword.
inline __m256i sbyte_pair(__m256i v, int b) {
  const __m256i x = _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * b), 24);
  return _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(x, 16));
}
// Two int16 as the dword (lo, hi).
inline int32_t pair(int lo, int hi) {
  return static_cast<int32_t>(static_cast<uint16_t>(lo) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
}

struct Acc {
  int t0;        // first token of the tile
  int64_t r0;    // the group's first row
  int rows;      // rows of the group (≤ 8)
  __m256i mask;  // lanes < rows
  bool first;    // first chunk: accumulators start at 0, else from y
};
inline __m256 load_y(const float* p, const Acc& a) {
  return a.rows == kRows ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, a.mask);
}
inline void store_y(float* p, const Acc& a, __m256 v) {
  if (a.rows == kRows)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, a.mask, v);
}

struct PQ4K {
  using Block = BlockQ4_K;
  static constexpr GemmTileFn kTile = gemm_q4_k_q8_k;
  static constexpr int kMinTokens = 2;  // 2 tokens: ~1.3x the tiles (in = 2048, 256 rows, one thread)
  // Live per token: an int16 and an int32 sum and the f32 accumulator; 6 tokens measured the same.
  static constexpr int kTok = 4;
  // One super-block of 8 rows: q[8j + k] lane l = row l's elements 32j + 4k .. +3 (0..15);
  // sc[j] lane l = (sc_j, sc_j); mn[k] lane l = (m_2k, m_2k+1), as int16 pairs.
  struct Panel {
    __m256i q[64];
    __m256i sc[8];
    __m256i mn[4];
    __m256 d, dmin;
  };
  // Per token and super-block of the chunk: d_x and the sub-blocks' activation sums as int16
  // pairs (bsums_4k + bsums_4k+1, bsums_4k+2 + bsums_4k+3): |Σ| ≤ 32·128 fits.
  struct Side {
    float xd[kGemmPanelTokens][kChunkSB];
    int32_t bs[kGemmPanelTokens][kChunkSB][4];
  };

  static void side(const BlockQ8_K& b, Side& s, int t, int i) {
    s.xd[t][i] = b.d;
    for (int k = 0; k < 4; ++k)
      s.bs[t][i][k] = pair(b.bsums[4 * k] + b.bsums[4 * k + 1], b.bsums[4 * k + 2] + b.bsums[4 * k + 3]);
  }

  static void pack(const uint8_t* const* rows, int64_t i, Panel& p) {
    const size_t base = static_cast<size_t>(i) * sizeof(Block);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      // 32 bytes: low nibbles are sub-block 2c, high nibbles sub-block 2c + 1.
      __m256i r[8];
      transpose8x8(rows, base + offsetof(Block, qs) + 32 * c, r);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        p.q[16 * c + k] = _mm256_and_si256(r[k], m4);
        p.q[16 * c + 8 + k] = _mm256_and_si256(_mm256_srli_epi16(r[k], 4), m4);
      }
    }
    // The block's first 16 bytes: d | dmin, then the 12 scale bytes as dwords a, b, c, unpacked
    // as quant/q4_k_scales.h does, on 8 rows at once.
    static_assert(offsetof(Block, dmin) == 2 && offsetof(Block, scales) == 4, "BlockQ4_K layout");
    __m256i s[4];
    transpose8x4(rows, base, s);
    p.d = f16x8<Block>(rows, i, offsetof(Block, d));
    p.dmin = f16x8<Block>(rows, i, offsetof(Block, dmin));
    const __m256i c3f = _mm256_set1_epi8(0x3f), c0f = _mm256_set1_epi8(0x0f), c30 = _mm256_set1_epi8(0x30);
    const __m256i sc_lo = _mm256_and_si256(s[1], c3f), m_lo = _mm256_and_si256(s[2], c3f);
    const __m256i sc_hi =
        _mm256_or_si256(_mm256_and_si256(s[3], c0f), _mm256_and_si256(_mm256_srli_epi32(s[1], 2), c30));
    const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s[3], 4), c0f),
                                         _mm256_and_si256(_mm256_srli_epi32(s[2], 2), c30));
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      p.sc[j] = byte_pair(sc_lo, j);
      p.sc[4 + j] = byte_pair(sc_hi, j);
    }
    // Bytes (m0, m1, m2, m3) → int16 pairs (m0, m1) and (m2, m3).
    const __m256i lo8 = _mm256_set1_epi32(0xff), hi8 = _mm256_set1_epi32(0xff0000);
    const __m256i mins[2] = {m_lo, m_hi};
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i v = mins[h];
      p.mn[2 * h] = _mm256_or_si256(_mm256_and_si256(v, lo8), _mm256_and_si256(_mm256_slli_epi32(v, 8), hi8));
      p.mn[2 * h + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(v, 16), lo8),
                                        _mm256_and_si256(_mm256_srli_epi32(v, 8), hi8));
    }
  }

  // T tokens (a.t0..) against kc panels from super-block i0.
  template <int T>
  static void tokens(const Panel* pk, int kc, const Side& s, const void* const* x, int64_t i0,
                     float* const* y, const Acc& a) {
    __m256 acc[T];
    const BlockQ8_K* xb[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[t] = a.first ? _mm256_setzero_ps() : load_y(y[a.t0 + t] + a.r0, a);
      xb[t] = static_cast<const BlockQ8_K*>(x[a.t0 + t]) + i0;
    }
    for (int i = 0; i < kc; ++i) {
      const Panel& p = pk[i];
      __m256i sumi[T];
      for (int j = 0; j < 8; ++j) {
        const __m256i* q = p.q + 8 * j;
        __m256i s16[T];
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m256i qk = _mm256_load_si256(q + k);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const __m256i pr = _mm256_maddubs_epi16(qk, bcast4(xb[t][i].qs + 32 * j + 4 * k));
            s16[t] = k == 0 ? pr : _mm256_add_epi16(s16[t], pr);
            pin(s16[t]);
          }
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m256i v = _mm256_madd_epi16(s16[t], p.sc[j]);
          sumi[t] = j == 0 ? v : _mm256_add_epi32(sumi[t], v);
          pin(sumi[t]);
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int32_t* bs = s.bs[a.t0 + t][i];
        __m256i summ = _mm256_madd_epi16(p.mn[0], _mm256_set1_epi32(bs[0]));
        summ = _mm256_add_epi32(summ, _mm256_madd_epi16(p.mn[1], _mm256_set1_epi32(bs[1])));
        summ = _mm256_add_epi32(summ, _mm256_madd_epi16(p.mn[2], _mm256_set1_epi32(bs[2])));
        summ = _mm256_add_epi32(summ, _mm256_madd_epi16(p.mn[3], _mm256_set1_epi32(bs[3])));
        const __m256 xd = _mm256_set1_ps(s.xd[a.t0 + t][i]);
        const __m256 d = _mm256_mul_ps(p.d, xd), dmin = _mm256_mul_ps(p.dmin, xd);
        acc[t] = _mm256_add_ps(acc[t], _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi[t])),
                                                     _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summ))));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) store_y(y[a.t0 + t] + a.r0, a, acc[t]);
  }
};

struct PQ6K {
  using Block = BlockQ6_K;
  static constexpr GemmTileFn kTile = gemm_q6_k_q8_k;
  static constexpr int kMinTokens = 3;  // at 2 tokens the tiles are ~1.2x faster, at 3 the panel ~1.3x
  static constexpr int kTok = 4;
  // One super-block of 8 rows: q[4j + k] lane l = row l's elements 16j + 4k .. +3 (0..63);
  // sc[j] lane l = (sc_j, sc_j); sp[k] lane l = (sc_2k, sc_2k+1), as int16 pairs.
  struct Panel {
    __m256i q[64];
    __m256i sc[16];
    __m256i sp[8];
    __m256 d;
  };
  // Per token and super-block: d_x and the pairs (bsums_2k, bsums_2k+1) as int16.
  struct Side {
    float xd[kGemmPanelTokens][kChunkSB];
    int32_t bs[kGemmPanelTokens][kChunkSB][8];
  };

  static void side(const BlockQ8_K& b, Side& s, int t, int i) {
    s.xd[t][i] = b.d;
    for (int k = 0; k < 8; ++k) s.bs[t][i][k] = pair(b.bsums[2 * k], b.bsums[2 * k + 1]);
  }

  static void pack(const uint8_t* const* rows, int64_t i, Panel& p) {
    const size_t base = static_cast<size_t>(i) * sizeof(Block);
    const __m256i m4 = _mm256_set1_epi8(0x0f), c30 = _mm256_set1_epi8(0x30);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      // Half h (elements 128h..): ql bytes 0..31 / 32..63 of the half give elements 0..31 / 32..63
      // (low nibbles) and 64..95 / 96..127 (high nibbles); qh byte b holds their top 2 bits in
      // bits 0-1 / 2-3 / 4-5 / 6-7 (quant/q6_k.cpp's layout).
      __m256i l0[8], l1[8], hb[8];
      transpose8x8(rows, base + offsetof(Block, ql) + 64 * h, l0);
      transpose8x8(rows, base + offsetof(Block, ql) + 64 * h + 32, l1);
      transpose8x8(rows, base + offsetof(Block, qh) + 32 * h, hb);
      __m256i* q = p.q + 32 * h;
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m256i hk = hb[k];
        q[k] = _mm256_or_si256(_mm256_and_si256(l0[k], m4), _mm256_and_si256(_mm256_slli_epi16(hk, 4), c30));
        q[8 + k] =
            _mm256_or_si256(_mm256_and_si256(l1[k], m4), _mm256_and_si256(_mm256_slli_epi16(hk, 2), c30));
        q[16 + k] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0[k], 4), m4), _mm256_and_si256(hk, c30));
        q[24 + k] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1[k], 4), m4),
                                    _mm256_and_si256(_mm256_srli_epi16(hk, 2), c30));
      }
    }
    __m256i s[4];
    transpose8x4(rows, base + offsetof(Block, scales), s);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 4
      for (int b = 0; b < 4; ++b) p.sc[4 * k + b] = sbyte_pair(s[k], b);
      // Signed bytes (b0, b1, b2, b3) → int16 pairs (b0, b1) and (b2, b3).
      const __m256i even = _mm256_srai_epi16(_mm256_slli_epi16(s[k], 8), 8);  // (b0, b2)
      const __m256i odd = _mm256_srai_epi16(s[k], 8);                         // (b1, b3)
      p.sp[2 * k] = _mm256_blend_epi16(even, _mm256_slli_epi32(odd, 16), 0xAA);
      p.sp[2 * k + 1] = _mm256_blend_epi16(_mm256_srli_epi32(even, 16), odd, 0xAA);
    }
    p.d = f16x8<Block>(rows, i, offsetof(Block, d));
  }

  template <int T>
  static void tokens(const Panel* pk, int kc, const Side& s, const void* const* x, int64_t i0,
                     float* const* y, const Acc& a) {
    __m256 acc[T];
    const BlockQ8_K* xb[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[t] = a.first ? _mm256_setzero_ps() : load_y(y[a.t0 + t] + a.r0, a);
      xb[t] = static_cast<const BlockQ8_K*>(x[a.t0 + t]) + i0;
    }
    for (int i = 0; i < kc; ++i) {
      const Panel& p = pk[i];
      __m256i sumi[T];
      // −32·Σ_j sc_j·bsums_j: |Σ_j sc_j·bsums_j| ≤ 16·128·2048, so the shift stays in int32.
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int32_t* bs = s.bs[a.t0 + t][i];
        __m256i o = _mm256_madd_epi16(p.sp[0], _mm256_set1_epi32(bs[0]));
#pragma GCC unroll 8
        for (int k = 1; k < 8; ++k)
          o = _mm256_add_epi32(o, _mm256_madd_epi16(p.sp[k], _mm256_set1_epi32(bs[k])));
        sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(o, 5));
      }
      for (int j = 0; j < 16; ++j) {
        const __m256i* q = p.q + 4 * j;
        const __m256i q0 = _mm256_load_si256(q), q1 = _mm256_load_si256(q + 1);
        const __m256i q2 = _mm256_load_si256(q + 2), q3 = _mm256_load_si256(q + 3);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int8_t* xq = xb[t][i].qs + 16 * j;
          __m256i lo = _mm256_add_epi16(_mm256_maddubs_epi16(q0, bcast4(xq)),
                                        _mm256_maddubs_epi16(q1, bcast4(xq + 4)));
          __m256i hi = _mm256_add_epi16(_mm256_maddubs_epi16(q2, bcast4(xq + 8)),
                                        _mm256_maddubs_epi16(q3, bcast4(xq + 12)));
          lo = _mm256_madd_epi16(lo, p.sc[j]);
          hi = _mm256_madd_epi16(hi, p.sc[j]);
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(lo, hi));
          pin(sumi[t]);
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256 d = _mm256_mul_ps(p.d, _mm256_set1_ps(s.xd[a.t0 + t][i]));
        acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi[t])));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) store_y(y[a.t0 + t] + a.r0, a, acc[t]);
  }
};

// A token tile of tt ≤ P::kTok tokens (tt at run time, T at compile time).
template <class P, int T = P::kTok>
void run_tile(int tt, const typename P::Panel* pk, int kc, const typename P::Side& s, const void* const* x,
              int64_t i0, float* const* y, const Acc& a) {
  if constexpr (T > 1) {
    if (tt < T) return run_tile<P, T - 1>(tt, pk, kc, s, x, i0, y, a);
  }
  P::template tokens<T>(pk, kc, s, x, i0, y, a);
}

template <class P>
void gemm_panel_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                  float* const* y) {
  if (nt < P::kMinTokens) {
    gemm_by_tiles<P::kTile>(n, w, ws, nr, x, nt, y);
    return;
  }
  using Block = typename P::Block;
  const int64_t nb = n / QK_K;
  alignas(32) typename P::Panel pk[kChunkSB];
  alignas(32) typename P::Side side;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i0 = 0; i0 < nb; i0 += kChunkSB) {
    const int kc = static_cast<int>(std::min<int64_t>(kChunkSB, nb - i0));
    const size_t off = static_cast<size_t>(i0) * sizeof(Block);
    for (int t = 0; t < nt; ++t) {
      const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x[t]) + i0;
      for (int i = 0; i < kc; ++i) P::side(xb[i], side, t, i);
    }
    for (int64_t r0 = 0; r0 < nr; r0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, nr - r0));
      // Rows past nr repeat the last one: a partial group reads only its own rows.
      const uint8_t* rp[kRows];
      for (int l = 0; l < kRows; ++l) rp[l] = at(w, static_cast<size_t>(r0 + std::min(l, rows - 1)) * ws);
      // The next group's chunk (prefetches never fault, past nr included): 8 interleaved row
      // streams defeat the hardware prefetchers.
      const uint8_t* next = at(w, static_cast<size_t>(r0 + kRows) * ws + off);
      for (int i = 0; i < kc; ++i) {
        for (int l = 0; l < kRows; ++l)
          for (size_t b = 0; b < sizeof(Block); b += 64)
            _mm_prefetch(reinterpret_cast<const char*>(next + l * ws + i * sizeof(Block) + b), _MM_HINT_T0);
        P::pack(rp, i0 + i, pk[i]);
      }
      Acc a{0, r0, rows, _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), lane), i0 == 0};
      for_each_balanced_tile(nt, P::kTok, [&](int t0, int tt) {
        a.t0 = t0;
        run_tile<P>(tt, pk, kc, side, x, i0, y, a);
      });
    }
  }
}

}  // namespace

void gemm_panel_q4_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y) {
  gemm_panel_k<PQ4K>(n, w, ws, nr, x, nt, y);
}
void gemm_panel_q6_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y) {
  gemm_panel_k<PQ6K>(n, w, ws, nr, x, nt, y);
}

}  // namespace strata::x86::avx2
