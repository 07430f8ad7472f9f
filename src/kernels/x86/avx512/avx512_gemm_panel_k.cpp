// AVX-512 many-token products (KernelTraits::gemm_panel) for the K-quants against Q8_K
// activations: Q4_K and Q6_K, bit-identical to vec_dot.
//
// As for the 32-element types (avx512_gemm_panel.cpp), lanes hold weight rows: a group of 16
// rows is unpacked and transposed once per K chunk (2 super-blocks) into a panel — per
// super-block 64 registers of unsigned quants (lane l = row l's elements 4k..4k+3), the sub-block
// scales per lane, Q4_K's mins as int16 pairs and the f32 super-block scales — and every token of
// the call then reuses it: per sub-block VPDPBUSDs with the token's activation dword broadcast to
// all lanes, then the sub-block scale (Q4_K: the two 16-element half sums as one int16 pair into
// a VPDPWSSD; Q6_K: VPMULLD and an add), for 16 rows at once. The 4/6-bit unpack, the 6-bit scale/min unpack
// and the fp16 conversions thus run once per 16 rows and K chunk instead of once per 4×4 tile. That transpose
// costs about as much as one (Q4_K) or three (Q6_K) tokens' products, so calls with fewer than 2 / 4 tokens
// (a MoE expert's share of a short prompt) run the 4×4 tiles instead.
//
// Exactness: every int32 sum is exact (wrapping, never saturating, so its order is free):
//   Q4_K  sumi = Σ_j sc_j·Σ_k q·x,  summ = Σ_j m_j·(bsums_2j + bsums_2j+1) (VPDPWSSD on pairs),
//   Q6_K  sumi = Σ_j sc_j·(Σ_k q·x − 32·bsums_j) (the −32 offset seeds each sub-block's chain),
// and the f32 scaling per super-block follows vec_dot's operation order exactly
// (y += (d_w·d_x)·sumi − (dmin_w·d_x)·summ, super-blocks in order), so each output is
// bit-identical to the scalar vec_dot whatever nr, nt or the other rows and tokens of the call.
// No FMA contraction: the f32 scaling must round exactly as the scalar reference does.
#pragma GCC optimize("fp-contract=off")
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_panel_util.h"
#include "kernels/x86/tile_table.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

using panel::at;
using panel::kRows;

constexpr int kChunkSB = 2;  // K chunk: super-blocks per panel (512 elements, ~10 KiB of panel)
constexpr int kTokTile = 8;  // tokens whose accumulators live in registers

// Four activation bytes as one dword (Q8_K's qs are dword-aligned: an embedded broadcast).
inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// v (< 2^15 per dword) in both int16 halves of its dword.
inline __m512i pair16(__m512i v) {
  return _mm512_or_si512(v, _mm512_slli_epi32(v, 16));
}

// Byte b of every dword, zero-extended.
inline __m512i byte_of(__m512i v, int b) {
  return _mm512_and_si512(_mm512_srli_epi32(v, 8 * b), _mm512_set1_epi32(0xff));
}

struct PQ4K {
  using Block = BlockQ4_K;
  static constexpr GemmTileFn kTile = gemm_q4_k_q8_k;
  static constexpr int kMinTokens = 2;  // below: gemm_by_tiles (bench/kernels_bench BM_GemmK)
  // One super-block of 16 rows: q[8j + k] lane l = row l's elements 32j + 4k .. +3 (0..15);
  // sc[j] lane l = (sc_j, sc_j) as int16 pair; mn[k] lane l = (m_2k, m_2k+1) as int16 pair.
  struct Panel {
    __m512i q[64];
    __m512i sc[8];
    __m512i mn[4];
    __m512 d, dmin;
  };
  // Per token and super-block of the chunk: d_x and the sub-block sums of the activations as
  // int16 pairs (bsums_4k + bsums_4k+1, bsums_4k+2 + bsums_4k+3): |Σ| ≤ 32·128 fits.
  struct Side {
    float xd[kGemmPanelTokens][kChunkSB];
    int32_t bs[kGemmPanelTokens][kChunkSB][4];
  };

  static void side(const BlockQ8_K& b, Side& s, int t, int i) {
    s.xd[t][i] = b.d;
    for (int k = 0; k < 4; ++k) {
      const int lo = b.bsums[4 * k] + b.bsums[4 * k + 1], hi = b.bsums[4 * k + 2] + b.bsums[4 * k + 3];
      s.bs[t][i][k] = static_cast<int32_t>(static_cast<uint16_t>(lo) | (static_cast<uint32_t>(hi) << 16));
    }
  }

  static void pack(const uint8_t* const* rows, int64_t i, Panel& p) {
    const size_t base = static_cast<size_t>(i) * sizeof(Block);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      // 32 bytes: low nibbles are sub-block 2c, high nibbles sub-block 2c + 1.
      __m512i r[8];
      panel::transpose16x8(rows, r, base + offsetof(Block, qs) + 32 * c);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        p.q[16 * c + k] = _mm512_and_si512(r[k], m4);
        p.q[16 * c + 8 + k] = _mm512_and_si512(_mm512_srli_epi16(r[k], 4), m4);
      }
    }
    // The block's first 16 bytes: d | dmin, then the 12 scale bytes as dwords a, b, c, unpacked
    // as quant/q4_k_scales.h does, on 16 rows at once.
    static_assert(offsetof(Block, dmin) == 2 && offsetof(Block, scales) == 4, "BlockQ4_K layout");
    __m512i s[4];
    panel::transpose16x4(rows, s, base);
    p.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(s[0]));
    p.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(s[0], 16)));
    const __m512i c3f = _mm512_set1_epi8(0x3f), c0f = _mm512_set1_epi8(0x0f), c30 = _mm512_set1_epi8(0x30);
    const __m512i sc_lo = _mm512_and_si512(s[1], c3f), m_lo = _mm512_and_si512(s[2], c3f);
    const __m512i sc_hi =
        _mm512_or_si512(_mm512_and_si512(s[3], c0f), _mm512_and_si512(_mm512_srli_epi32(s[1], 2), c30));
    const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(s[3], 4), c0f),
                                         _mm512_and_si512(_mm512_srli_epi32(s[2], 2), c30));
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      p.sc[j] = pair16(byte_of(sc_lo, j));
      p.sc[4 + j] = pair16(byte_of(sc_hi, j));
    }
    // Bytes (m0, m1, m2, m3) → int16 pairs (m0, m1) and (m2, m3).
    const __m512i lo8 = _mm512_set1_epi32(0xff), hi8 = _mm512_set1_epi32(0xff0000);
    const __m512i mins[2] = {m_lo, m_hi};
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i v = mins[h];
      p.mn[2 * h] = _mm512_or_si512(_mm512_and_si512(v, lo8), _mm512_and_si512(_mm512_slli_epi32(v, 8), hi8));
      p.mn[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(v, 16), lo8),
                                        _mm512_and_si512(_mm512_srli_epi32(v, 8), hi8));
    }
  }

  // T tokens (t0.. of the call) against kc panels from super-block i0: y[t][r0 + l] (+)= lane l
  // under mask m.
  template <int T>
  static void tokens(const Panel* pk, int kc, const Side& s, int t0, const void* const* x, int64_t i0,
                     float* const* y, int64_t r0, __mmask16 m, bool first) {
    __m512 acc[T];
    const BlockQ8_K* xb[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, y[t0 + t] + r0);
      xb[t] = static_cast<const BlockQ8_K*>(x[t0 + t]) + i0;
    }
    const __m512i zero = _mm512_setzero_si512();
    for (int i = 0; i < kc; ++i) {
      const Panel& p = pk[i];
      __m512i sumi[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) sumi[t] = zero;
      for (int j = 0; j < 8; ++j) {
        const __m512i* q = p.q + 8 * j;
        const __m512i sc = p.sc[j];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int8_t* xq = xb[t][i].qs + 32 * j;
          // The sub-block's halves (elements 0..15, 16..31) as two chains: |Σ| ≤ 16·15·128 < 2^15,
          // so both sums fit one int16 pair per lane and one VPDPWSSD applies the scale to both
          // (no VPMULLD, two uops on port 0 where the VPDPBUSDs run).
          __m512i a = _mm512_dpbusd_epi32(zero, q[0], bcast4(xq + 0));
          __m512i b = _mm512_dpbusd_epi32(zero, q[4], bcast4(xq + 16));
          a = _mm512_dpbusd_epi32(a, q[1], bcast4(xq + 4));
          b = _mm512_dpbusd_epi32(b, q[5], bcast4(xq + 20));
          a = _mm512_dpbusd_epi32(a, q[2], bcast4(xq + 8));
          b = _mm512_dpbusd_epi32(b, q[6], bcast4(xq + 24));
          a = _mm512_dpbusd_epi32(a, q[3], bcast4(xq + 12));
          b = _mm512_dpbusd_epi32(b, q[7], bcast4(xq + 28));
          const __m512i ab = _mm512_mask_blend_epi16(0xAAAAAAAA, a, _mm512_bslli_epi128(b, 2));
          sumi[t] = _mm512_dpwssd_epi32(sumi[t], ab, sc);
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int32_t* bs = s.bs[t0 + t][i];
        __m512i summ = _mm512_dpwssd_epi32(zero, p.mn[0], _mm512_set1_epi32(bs[0]));
        summ = _mm512_dpwssd_epi32(summ, p.mn[1], _mm512_set1_epi32(bs[1]));
        summ = _mm512_dpwssd_epi32(summ, p.mn[2], _mm512_set1_epi32(bs[2]));
        summ = _mm512_dpwssd_epi32(summ, p.mn[3], _mm512_set1_epi32(bs[3]));
        const __m512 xd = _mm512_set1_ps(s.xd[t0 + t][i]);
        const __m512 d = _mm512_mul_ps(p.d, xd), dmin = _mm512_mul_ps(p.dmin, xd);
        acc[t] = _mm512_add_ps(acc[t], _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi[t])),
                                                     _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summ))));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y[t0 + t] + r0, m, acc[t]);
  }
};

struct PQ6K {
  using Block = BlockQ6_K;
  static constexpr GemmTileFn kTile = gemm_q6_k_q8_k;
  static constexpr int kMinTokens = 4;
  // One super-block of 16 rows: q[4j + k] lane l = row l's elements 16j + 4k .. +3 (0..63);
  // sc[j] lane l = the int8 scale of sub-block j.
  struct Panel {
    __m512i q[64];
    __m512i sc[16];
    __m512 d;
  };
  // Per token and super-block: d_x and −32·bsums_j, the seed of sub-block j's chain.
  struct Side {
    float xd[kGemmPanelTokens][kChunkSB];
    int32_t c[kGemmPanelTokens][kChunkSB][16];
  };

  static void side(const BlockQ8_K& b, Side& s, int t, int i) {
    s.xd[t][i] = b.d;
    for (int j = 0; j < 16; ++j) s.c[t][i][j] = -32 * b.bsums[j];
  }

  static void pack(const uint8_t* const* rows, int64_t i, Panel& p) {
    const size_t base = static_cast<size_t>(i) * sizeof(Block);
    const __m512i m4 = _mm512_set1_epi8(0x0f), c30 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      // Half h (elements 128h..): ql bytes 0..31 / 32..63 of the half give elements 0..31 / 32..63
      // (low nibbles) and 64..95 / 96..127 (high nibbles); qh byte b holds their top 2 bits in
      // bits 0-1 / 2-3 / 4-5 / 6-7 (quant/q6_k.cpp's layout).
      __m512i l0[8], l1[8], hb[8];
      panel::transpose16x8(rows, l0, base + offsetof(Block, ql) + 64 * h);
      panel::transpose16x8(rows, l1, base + offsetof(Block, ql) + 64 * h + 32);
      panel::transpose16x8(rows, hb, base + offsetof(Block, qh) + 32 * h);
      __m512i* q = p.q + 32 * h;
#pragma GCC unroll 16
      for (int k = 0; k < 8; ++k) {
        const __m512i hk = hb[k];
        q[k] = _mm512_or_si512(_mm512_and_si512(l0[k], m4), _mm512_and_si512(_mm512_slli_epi16(hk, 4), c30));
        q[8 + k] =
            _mm512_or_si512(_mm512_and_si512(l1[k], m4), _mm512_and_si512(_mm512_slli_epi16(hk, 2), c30));
        q[16 + k] =
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0[k], 4), m4), _mm512_and_si512(hk, c30));
        q[24 + k] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1[k], 4), m4),
                                    _mm512_and_si512(_mm512_srli_epi16(hk, 2), c30));
      }
    }
    __m512i s[4];
    panel::transpose16x4(rows, s, base + offsetof(Block, scales));
#pragma GCC unroll 16
    for (int k = 0; k < 4; ++k)
#pragma GCC unroll 16
      for (int b = 0; b < 4; ++b)
        p.sc[4 * k + b] = _mm512_srai_epi32(_mm512_slli_epi32(s[k], 24 - 8 * b), 24);
    // d: the top half of dword 3 of the block's last 16 bytes (scales 2..15, then d).
    static_assert(offsetof(Block, d) == sizeof(Block) - 2, "BlockQ6_K layout");
    __m512i e[4];
    panel::transpose16x4(rows, e, base + sizeof(Block) - 16);
    p.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(e[3], 16)));
  }

  template <int T>
  static void tokens(const Panel* pk, int kc, const Side& s, int t0, const void* const* x, int64_t i0,
                     float* const* y, int64_t r0, __mmask16 m, bool first) {
    __m512 acc[T];
    const BlockQ8_K* xb[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, y[t0 + t] + r0);
      xb[t] = static_cast<const BlockQ8_K*>(x[t0 + t]) + i0;
    }
    const __m512i zero = _mm512_setzero_si512();
    for (int i = 0; i < kc; ++i) {
      const Panel& p = pk[i];
      __m512i sumi[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) sumi[t] = zero;
      for (int j = 0; j < 16; ++j) {
        const __m512i* q = p.q + 4 * j;
        const __m512i sc = p.sc[j];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int8_t* xq = xb[t][i].qs + 16 * j;
          __m512i a = _mm512_dpbusd_epi32(_mm512_set1_epi32(s.c[t0 + t][i][j]), q[0], bcast4(xq + 0));
          __m512i b = _mm512_dpbusd_epi32(zero, q[1], bcast4(xq + 4));
          a = _mm512_dpbusd_epi32(a, q[2], bcast4(xq + 8));
          b = _mm512_dpbusd_epi32(b, q[3], bcast4(xq + 12));
          sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(_mm512_add_epi32(a, b), sc));
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512 d = _mm512_mul_ps(p.d, _mm512_set1_ps(s.xd[t0 + t][i]));
        acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi[t])));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y[t0 + t] + r0, m, acc[t]);
  }
};

template <class P>
using TokensFn = void (*)(const typename P::Panel*, int, const typename P::Side&, int, const void* const*,
                          int64_t, float* const*, int64_t, __mmask16, bool);

template <class P>
constexpr TokensFn<P> kTokens[kTokTile] = {
    P::template tokens<1>, P::template tokens<2>, P::template tokens<3>, P::template tokens<4>,
    P::template tokens<5>, P::template tokens<6>, P::template tokens<7>, P::template tokens<8>};

template <class P>
void gemm_panel_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                  float* const* y) {
  if (nt < P::kMinTokens) {
    gemm_by_tiles<P::kTile>(n, w, ws, nr, x, nt, y);
    return;
  }
  using Block = typename P::Block;
  const int64_t nb = n / QK_K;
  alignas(64) typename P::Panel pk[kChunkSB];
  alignas(64) typename P::Side side;
  for (int64_t i0 = 0; i0 < nb; i0 += kChunkSB) {
    const int kc = static_cast<int>(std::min<int64_t>(kChunkSB, nb - i0));
    const size_t off = static_cast<size_t>(i0) * sizeof(Block), len = kc * sizeof(Block);
    panel::prefetch_rows(w, ws, 0, std::min<int64_t>(nr, kRows), off, len);
    for (int t = 0; t < nt; ++t) {
      const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x[t]) + i0;
      for (int i = 0; i < kc; ++i) P::side(xb[i], side, t, i);
    }
    for (int64_t r0 = 0; r0 < nr; r0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, nr - r0));
      const uint8_t* rp[kRows];
      panel::group_rows(w, ws, r0, rows, rp);
      // The next 16 rows' chunk (the next group, or past nr the rows a next call is likely to
      // take), one super-block per row at a time while this group's is unpacked.
      const uint8_t* next = at(w, static_cast<size_t>(r0 + kRows) * ws + off);
      for (int i = 0; i < kc; ++i) {
        for (int l = 0; l < kRows; ++l)
          for (size_t b = 0; b < sizeof(Block); b += 64)
            _mm_prefetch(reinterpret_cast<const char*>(next + l * ws + i * sizeof(Block) + b), _MM_HINT_T0);
        P::pack(rp, i0 + i, pk[i]);
      }
      const __mmask16 m = static_cast<__mmask16>((1u << rows) - 1);
      for (int t0 = 0; t0 < nt; t0 += kTokTile) {
        const int tt = std::min(kTokTile, nt - t0);
        kTokens<P>[tt - 1](pk, kc, side, t0, x, i0, y, r0, m, i0 == 0);
      }
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

}  // namespace strata::x86::avx512
