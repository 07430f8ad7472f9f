// AVX-512 many-token products (KernelTraits::gemm_panel) for 32-element block weights against
// Q8_0 activations: Q8_0, Q4_0 and MXFP4.
//
// Lanes hold weight rows, not positions along a row: a row group of 16 rows is transposed once
// per K chunk into a panel of unsigned bytes, W_j with lane l = row l's elements 4j..4j+3 of a
// block (u = value + kOffset), plus the rows' block scales as one f32 vector. Every token then
// costs, per block, eight VPDPBUSD of the panel with its own activation dword broadcast to all
// lanes (memory operand), one conversion and two f32 ops for all 16 rows — no horizontal sums,
// no per-token weight decode, and the outputs of a token are one 16-float store. The offset
// comes back out through each token's −kOffset·Σx per block, which seeds its products:
//   y[t][r] = Σ_blocks  d_w[r]·d_x[t] · (Σ_k u[r][k]·x[t][k] − kOffset·Σ_k x[t][k]).
// An element's arithmetic does not depend on nr, nt or on which rows and tokens share a call,
// and equals vec_dot up to f32 summation order.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/avx512/avx512_panel.h"
#include "kernels/x86/avx512/avx512_panel_util.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

using panel::at;
using panel::kRows;
using panel::prefetch_rows;
using panel::transpose16x4;
using panel::transpose16x8;

constexpr int kChunkBlocks = 32;  // K chunk: blocks per panel (1024 elements)
constexpr int kTokTile = 8;       // tokens whose accumulators live in registers

// Four activation bytes as one dword: Q8_0's qs sit 2 bytes into a 34-byte block, so the
// load is unaligned (memcpy: one mov, no misaligned int32_t access).
inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// 2^(e−128) (quant/fp8_fp4's e8m0_to_f32_half) for 16 exponents.
inline __m512 e8m0_half16(__m128i e8) {
  const __m512i e = _mm512_cvtepu8_epi32(e8);
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, sub));
}

// One K chunk of a row group: q[i][j] lane l = row l's unsigned bytes 4j..4j+3 of block i,
// d[i] lane l = row l's scale of block i.
struct Panel {
  __m512i q[kChunkBlocks][8];
  __m512 d[kChunkBlocks];
};

// Per token of the call and block of the chunk: the activation scale and −kOffset·Σx.
struct Side {
  float xd[kGemmPanelTokens][kChunkBlocks];
  int32_t c[kGemmPanelTokens][kChunkBlocks];
};

struct PQ8_0 {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 128;
  static void pack(const uint8_t* const* rows, int64_t i, __m512i* q, __m512* d) {
    const uint8_t* p[kRows];
    alignas(32) uint16_t h[kRows];
    for (int l = 0; l < kRows; ++l) {
      const Block* b = reinterpret_cast<const Block*>(rows[l]) + i;
      p[l] = reinterpret_cast<const uint8_t*>(b->qs);
      h[l] = b->d;
    }
    transpose16x8(p, q);
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int j = 0; j < 8; ++j) q[j] = _mm512_xor_si512(q[j], bias);
    *d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
  }
};

// Nibble blocks (Q4_0 layout: byte k holds elements k and k+16) → unsigned bytes.
template <class Derived, class B>
struct Nibbles {
  using Block = B;
  static void pack(const uint8_t* const* rows, int64_t i, __m512i* q, __m512* d) {
    const uint8_t* p[kRows];
    for (int l = 0; l < kRows; ++l) p[l] = reinterpret_cast<const Block*>(rows[l])[i].qs;
    __m512i r[4];
    transpose16x4(p, r);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int k = 0; k < 4; ++k) {
      q[k] = Derived::map(_mm512_and_si512(r[k], m4));
      q[4 + k] = Derived::map(_mm512_and_si512(_mm512_srli_epi16(r[k], 4), m4));
    }
    *d = Derived::scales(rows, i);
  }
};

struct PQ4_0 : Nibbles<PQ4_0, BlockQ4_0> {
  static constexpr int kOffset = 8;  // value = nibble − 8
  static __m512i map(__m512i nib) { return nib; }
  static __m512 scales(const uint8_t* const* rows, int64_t i) {
    alignas(32) uint16_t h[kRows];
    for (int l = 0; l < kRows; ++l) h[l] = reinterpret_cast<const BlockQ4_0*>(rows[l])[i].d;
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
  }
};

struct PMxfp4 : Nibbles<PMxfp4, BlockMxfp4> {
  static constexpr int kOffset = 12;  // doubled E2M1 + 12 ∈ [0, 24], scale 2^(e−128)
  static __m512i map(__m512i nib) {
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    return _mm512_shuffle_epi8(lut, nib);
  }
  static __m512 scales(const uint8_t* const* rows, int64_t i) {
    alignas(16) uint8_t e[kRows];
    for (int l = 0; l < kRows; ++l) e[l] = reinterpret_cast<const BlockMxfp4*>(rows[l])[i].e;
    return e8m0_half16(_mm_load_si128(reinterpret_cast<const __m128i*>(e)));
  }
};

// Σ of a Q8_0 block's 32 quants.
inline int32_t block_sum(const BlockQ8_0& b) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  return hsum_i32x8(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), v));
}

// T tokens (t0..t0+T−1 of the call) against one panel of kc blocks starting at block i0:
// y[t][r0 + l] (+)= lanes l < 16 under mask m.
template <int T>
void panel_tokens(const Panel& p, int kc, const Side& s, int t0, const void* const* x, int64_t i0,
                  float* const* y, int64_t r0, __mmask16 m, bool first) {
  __m512 acc[T];
  const BlockQ8_0* xb[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    acc[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, y[t0 + t] + r0);
    xb[t] = static_cast<const BlockQ8_0*>(x[t0 + t]) + i0;
  }
  for (int i = 0; i < kc; ++i) {
    const __m512i* q = p.q[i];
    const __m512 wd = p.d[i];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int8_t* xq = xb[t][i].qs;
      // Two chains of four, so a token's products need half the VPDPBUSD latency.
      __m512i a = _mm512_dpbusd_epi32(_mm512_set1_epi32(s.c[t0 + t][i]), q[0], bcast4(xq + 0));
      __m512i b = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[1], bcast4(xq + 4));
      a = _mm512_dpbusd_epi32(a, q[2], bcast4(xq + 8));
      b = _mm512_dpbusd_epi32(b, q[3], bcast4(xq + 12));
      a = _mm512_dpbusd_epi32(a, q[4], bcast4(xq + 16));
      b = _mm512_dpbusd_epi32(b, q[5], bcast4(xq + 20));
      a = _mm512_dpbusd_epi32(a, q[6], bcast4(xq + 24));
      b = _mm512_dpbusd_epi32(b, q[7], bcast4(xq + 28));
      const __m512 sc = _mm512_mul_ps(wd, _mm512_set1_ps(s.xd[t0 + t][i]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a, b)), sc, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y[t0 + t] + r0, m, acc[t]);
}

using PanelTokensFn = void (*)(const Panel&, int, const Side&, int, const void* const*, int64_t,
                               float* const*, int64_t, __mmask16, bool);
constexpr PanelTokensFn kPanelTokens[kTokTile] = {panel_tokens<1>, panel_tokens<2>, panel_tokens<3>,
                                                  panel_tokens<4>, panel_tokens<5>, panel_tokens<6>,
                                                  panel_tokens<7>, panel_tokens<8>};

template <class P>
void gemm_panel(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                float* const* y) {
  const int64_t nb = n / 32;
  alignas(64) Panel panel;
  alignas(64) Side side;
  for (int64_t i0 = 0; i0 < nb; i0 += kChunkBlocks) {
    const int kc = static_cast<int>(std::min<int64_t>(kChunkBlocks, nb - i0));
    const size_t off = static_cast<size_t>(i0) * sizeof(typename P::Block),
                 len = kc * sizeof(typename P::Block);
    prefetch_rows(w, ws, 0, std::min<int64_t>(nr, kRows), off, len);
    for (int t = 0; t < nt; ++t) {
      const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x[t]) + i0;
      for (int i = 0; i < kc; ++i) {
        side.xd[t][i] = h2f(xb[i].d);
        side.c[t][i] = -P::kOffset * block_sum(xb[i]);
      }
    }
    for (int64_t r0 = 0; r0 < nr; r0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, nr - r0));
      const uint8_t* rp[kRows];
      for (int l = 0; l < kRows; ++l) rp[l] = at(w, static_cast<size_t>(r0 + std::min(l, rows - 1)) * ws);
      // The next 16 rows' chunk (the next group, or past nr the rows a next call is likely to
      // take: an item's successor or the next expert), a line per row every other block.
      const uint8_t* next = at(w, static_cast<size_t>(r0 + kRows) * ws + off);
      for (int i = 0; i < kc; ++i) {
        if (i % 2 == 0)
          for (int l = 0; l < kRows; ++l)
            _mm_prefetch(reinterpret_cast<const char*>(next + l * ws + i * sizeof(typename P::Block)),
                         _MM_HINT_T0);
        P::pack(rp, i0 + i, panel.q[i], &panel.d[i]);
      }
      const __mmask16 m = static_cast<__mmask16>((1u << rows) - 1);
      for (int t0 = 0; t0 < nt; t0 += kTokTile) {
        const int tt = std::min(kTokTile, nt - t0);
        kPanelTokens[tt - 1](panel, kc, side, t0, x, i0, y, r0, m, i0 == 0);
      }
    }
  }
}

}  // namespace

void gemm_panel_q8_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y) {
  gemm_panel<PQ8_0>(n, w, ws, nr, x, nt, y);
}
void gemm_panel_q4_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y) {
  gemm_panel<PQ4_0>(n, w, ws, nr, x, nt, y);
}
void gemm_panel_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                           float* const* y) {
  gemm_panel<PMxfp4>(n, w, ws, nr, x, nt, y);
}

}  // namespace strata::x86::avx512

namespace strata::x86 {

void fill_avx512_panel(KernelTraits* t) {
  t[static_cast<size_t>(GgmlType::q8_0)].gemm_panel = avx512::gemm_panel_q8_0_q8_0;
  t[static_cast<size_t>(GgmlType::q4_0)].gemm_panel = avx512::gemm_panel_q4_0_q8_0;
  t[static_cast<size_t>(GgmlType::mxfp4)].gemm_panel = avx512::gemm_panel_mxfp4_q8_0;
  t[static_cast<size_t>(GgmlType::f16)].gemm_panel = avx512::gemm_panel_f16;
}

}  // namespace strata::x86
