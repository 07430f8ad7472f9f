// AVX2 many-token products (KernelTraits::gemm_panel) for CPUs without AVX-512: 32-element block
// weights (Q8_0, Q4_0, MXFP4) against Q8_0 activations.
//
// The AVX-512 panel's layout (avx512_gemm_panel.cpp) at half width: lanes hold weight rows, not
// positions along a row. A row group of 8 rows is transposed once per K chunk into a panel,
// W_j with lane l = row l's elements of dword j of a block, plus the rows' block scales as one
// f32 vector. Every token then costs, per block and group, int8 products with its activation
// dword broadcast to all lanes, one conversion and two f32 ops for 8 rows: no horizontal sums,
// no per-token weight decode, one 8-float store per token. Without VNNI the products are:
//   Q4_0 / MXFP4: unsigned bytes u = value + kOffset (nibble, or doubled E2M1 + 12) through
//     VPMADDUBSW against the signed activation bytes; the int16 pair sums of kGroup dwords add in
//     int16 (bounded below), then one VPMADDWD to int32. The offset comes back out through each
//     token's −kOffset·Σx per block.
//   Q8_0: weights sign-extended to int16 pairs through VPMADDWD against the activations widened
//     to int16 once per token and chunk (a side buffer shared by every row group).
// So y[t][r] = Σ_blocks  d_w[r]·d_x[t] · isum[t][r], the block's exact integer dot, summed in the
// order fma(isum, d_w·d_x, acc) over blocks — the AVX-512 panel's arithmetic, so both give the
// same bits. An element's arithmetic does not depend on nr, nt or on which rows and tokens share
// a call, and equals vec_dot up to f32 summation order.
//
// 16 YMM registers: a token tile of T tokens keeps T int16/int32 block sums and T f32
// accumulators live, plus the panel register and the broadcast (T = 6, 4 for MXFP4's two groups).
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "kernels/traits.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/tile_table.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx2 {
namespace {

constexpr int kRows = 8;             // rows per panel (one ymm of int32 lanes)
constexpr int kMaxChunkBlocks = 32;  // K chunk of the nibble types (1024 elements)

inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}
// Four bytes at p as a dword in every lane (Q8_0's qs sit 2 bytes into a block: unaligned).
inline __m256i bcast4(const void* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// 8 rows of 4 dwords (row l at p[l] + off) → 4 registers, R_k lane l = dword k of row l.
inline void transpose8x4(const uint8_t* const* p, size_t off, __m256i* r) {
  __m256i z[4];
#pragma GCC unroll 8
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

// The scales of the 8 rows' block i → 8 f32 lanes (built in registers: 8 narrow stores and
// one wide load would stall on store forwarding).
template <class B>
inline __m256 f16_scales8(const uint8_t* const* rows, int64_t i) {
  auto h = [&](int l) { return static_cast<short>(reinterpret_cast<const B*>(rows[l])[i].d); };
  return _mm256_cvtph_ps(_mm_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7)));
}

// Q8_0 weights: q[k] lane l = row l's (w[4k], w[4k+2]) as int16, q[8+k] = (w[4k+1], w[4k+3]);
// the activation side holds the same pairs of x (fill_side), so q[j] meets side dword j.
// |product pair| ≤ 2·128·128 in int32: exact for every byte.
struct PQ8_0 {
  using Block = BlockQ8_0;
  static constexpr int kRegs = 16;  // panel registers per block
  static constexpr int kChunk = 8;  // K chunk in blocks: the int16 side of 64 tokens is 32 KiB
  static constexpr int kTok = 6;
  static void pack(const uint8_t* const* rows, int64_t i, __m256i* q, __m256* d) {
    __m256i r[8];
    const size_t off = static_cast<size_t>(i) * sizeof(Block) + offsetof(Block, qs);
    transpose8x4(rows, off, r);
    transpose8x4(rows, off + 16, r + 4);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      q[k] = _mm256_srai_epi16(_mm256_slli_epi16(r[k], 8), 8);  // even bytes, sign-extended
      q[8 + k] = _mm256_srai_epi16(r[k], 8);                    // odd bytes
    }
    *d = f16_scales8<Block>(rows, i);
  }
};

// Nibble blocks (Q4_0 layout: byte k holds elements k and k+16) → unsigned bytes, q[j] lane l =
// row l's elements 4j..4j+3, the activation bytes of dword j.
template <class Derived, class B>
struct Nibbles {
  using Block = B;
  static constexpr int kRegs = 8;
  static constexpr int kChunk = kMaxChunkBlocks;
  static void pack(const uint8_t* const* rows, int64_t i, __m256i* q, __m256* d) {
    __m256i r[4];
    transpose8x4(rows, static_cast<size_t>(i) * sizeof(Block) + offsetof(Block, qs), r);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 8
    for (int k = 0; k < 4; ++k) {
      q[k] = Derived::map(_mm256_and_si256(r[k], m4));
      q[4 + k] = Derived::map(_mm256_and_si256(_mm256_srli_epi16(r[k], 4), m4));
    }
    *d = Derived::scales(rows, i);
  }
};

// |pair sum| ≤ 2·15·128 = 3840: 8 dwords' sums fit int16 (30720), for every activation byte.
struct PQ4_0 : Nibbles<PQ4_0, BlockQ4_0> {
  static constexpr int kOffset = 8;  // value = nibble − 8
  static constexpr int kGroup = 8;
  static constexpr int kTok = 6;
  static __m256i map(__m256i nib) { return nib; }
  static __m256 scales(const uint8_t* const* rows, int64_t i) { return f16_scales8<BlockQ4_0>(rows, i); }
};

// |pair sum| ≤ 2·24·128 = 6144: 4 dwords' sums fit int16 (24576), 8 would not.
struct PMxfp4 : Nibbles<PMxfp4, BlockMxfp4> {
  static constexpr int kOffset = 12;  // doubled E2M1 + 12 ∈ [0, 24], scale 2^(e−128)
  static constexpr int kGroup = 4;
  static constexpr int kTok = 4;
  static __m256i map(__m256i nib) {
    const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0, 12, 13,
                                         14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    return _mm256_shuffle_epi8(lut, nib);
  }
  // 2^(e−128) (quant/fp8_fp4's e8m0_to_f32_half) for 8 exponents: (e − 1) << 23 as f32 bits, or
  // the subnormal 0x00200000 << e for e < 2.
  static __m256 scales(const uint8_t* const* rows, int64_t i) {
    auto ex = [&](int l) { return static_cast<int>(reinterpret_cast<const BlockMxfp4*>(rows[l])[i].e); };
    const __m256i e = _mm256_setr_epi32(ex(0), ex(1), ex(2), ex(3), ex(4), ex(5), ex(6), ex(7));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, small));
  }
};

// One K chunk of a row group (kc ≤ P::kChunk blocks).
template <class P>
struct Panel {
  __m256i q[P::kChunk][P::kRegs];
  __m256 d[P::kChunk];
};

// Per token of the call and block of the chunk: the activation scale, −kOffset·Σx (nibble
// types) and the activations as int16 pairs (Q8_0).
struct Side {
  float xd[kGemmPanelTokens][kMaxChunkBlocks];
  int32_t c[kGemmPanelTokens][kMaxChunkBlocks];
};
struct SideQ8 {
  __m256i x[kGemmPanelTokens][PQ8_0::kChunk][2];  // [0] dword k = (x[4k], x[4k+2]), [1] (x[4k+1], x[4k+3])
};

// An empty asm the value passes through: GCC would otherwise reassociate a token's chain of
// integer adds into a tree over all products of the tile, live at once and spilled (16 YMM).
inline void pin(__m256i& v) {
  asm("" : "+x"(v));
}

// Σ of a Q8_0 block's 32 quants.
inline int32_t block_sum(const BlockQ8_0& b) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  return hsum_i32x8(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1)));
}

// Rows r0.. of y[t] for lanes under mask (rows < 8), or all 8 lanes.
inline __m256 load_y(const float* p, int rows, __m256i mask) {
  return rows == kRows ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}
inline void store_y(float* p, int rows, __m256i mask, __m256 v) {
  if (rows == kRows)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, mask, v);
}

struct Tile {
  int t0;          // first token of the tile (index into x, y and the side)
  int64_t i0, r0;  // the chunk's first block, the group's first row
  int rows;        // rows of the group (≤ 8)
  __m256i mask;    // lanes < rows
  bool first;      // first chunk: accumulators start at 0, else from y
};

// T tokens of a nibble type against one panel of kc blocks.
template <class P, int T>
void tokens_nib(const Panel<P>& p, int kc, const Side& s, const void* const* x, float* const* y,
                const Tile& tl) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  const BlockQ8_0* xb[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    acc[t] = tl.first ? _mm256_setzero_ps() : load_y(y[tl.t0 + t] + tl.r0, tl.rows, tl.mask);
    xb[t] = static_cast<const BlockQ8_0*>(x[tl.t0 + t]) + tl.i0;
  }
  for (int i = 0; i < kc; ++i) {
    const __m256i* q = p.q[i];
    __m256i s16[T], s32[T];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i qj = _mm256_load_si256(q + j);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i pr = _mm256_maddubs_epi16(qj, bcast4(xb[t][i].qs + 4 * j));
        s16[t] = j % P::kGroup == 0 ? pr : _mm256_add_epi16(s16[t], pr);
        pin(s16[t]);
        if (j % P::kGroup == P::kGroup - 1) {
          const __m256i g = _mm256_madd_epi16(s16[t], ones);
          s32[t] = j < P::kGroup ? _mm256_add_epi32(g, _mm256_set1_epi32(s.c[tl.t0 + t][i]))
                                 : _mm256_add_epi32(s32[t], g);
        }
      }
    }
    const __m256 wd = p.d[i];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 sc = _mm256_mul_ps(wd, _mm256_set1_ps(s.xd[tl.t0 + t][i]));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[t]), sc, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) store_y(y[tl.t0 + t] + tl.r0, tl.rows, tl.mask, acc[t]);
}

// T tokens of Q8_0 against one panel of kc blocks.
template <int T>
void tokens_q8(const Panel<PQ8_0>& p, int kc, const Side& s, const SideQ8& sx, float* const* y,
               const Tile& tl) {
  __m256 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    acc[t] = tl.first ? _mm256_setzero_ps() : load_y(y[tl.t0 + t] + tl.r0, tl.rows, tl.mask);
  for (int i = 0; i < kc; ++i) {
    const __m256i* q = p.q[i];
    __m256i s32[T];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const __m256i qj = _mm256_load_si256(q + j);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int32_t* xs = reinterpret_cast<const int32_t*>(&sx.x[tl.t0 + t][i][0]);
        const __m256i pr = _mm256_madd_epi16(qj, _mm256_set1_epi32(xs[j]));
        s32[t] = j == 0 ? pr : _mm256_add_epi32(s32[t], pr);
        pin(s32[t]);
      }
    }
    const __m256 wd = p.d[i];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 sc = _mm256_mul_ps(wd, _mm256_set1_ps(s.xd[tl.t0 + t][i]));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[t]), sc, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) store_y(y[tl.t0 + t] + tl.r0, tl.rows, tl.mask, acc[t]);
}

// A token tile of tt ≤ P::kTok tokens (tt chosen at run time, T at compile time).
template <class P, int T = P::kTok>
void run_tile(int tt, const Panel<P>& p, int kc, const Side& s, const SideQ8* sx, const void* const* x,
              float* const* y, const Tile& tl) {
  if constexpr (T > 1) {
    if (tt < T) return run_tile<P, T - 1>(tt, p, kc, s, sx, x, y, tl);
  }
  if constexpr (std::is_same_v<P, PQ8_0>) {
    (void)x;
    tokens_q8<T>(p, kc, s, *sx, y, tl);
  } else {
    (void)sx;
    tokens_nib<P, T>(p, kc, s, x, y, tl);
  }
}

// The chunk's activation side of every token: scales, offset corrections, int16 pairs (Q8_0).
template <class P>
void fill_side(const void* const* x, int nt, int64_t i0, int kc, Side& s, SideQ8* sx) {
  for (int t = 0; t < nt; ++t) {
    const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x[t]) + i0;
    for (int i = 0; i < kc; ++i) {
      s.xd[t][i] = h2f(xb[i].d);
      if constexpr (std::is_same_v<P, PQ8_0>) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[i].qs));
        sx->x[t][i][0] = _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8);
        sx->x[t][i][1] = _mm256_srai_epi16(v, 8);
      } else {
        s.c[t][i] = -P::kOffset * block_sum(xb[i]);
      }
    }
  }
}

template <class P>
void gemm_panel(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                float* const* y) {
  using Block = typename P::Block;
  const int64_t nb = n / 32;
  alignas(32) Panel<P> panel;
  alignas(32) Side side;
  alignas(32) static thread_local SideQ8 side_q8;  // 32 KiB: off the (pool thread's) stack
  SideQ8* sx = std::is_same_v<P, PQ8_0> ? &side_q8 : nullptr;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i0 = 0; i0 < nb; i0 += P::kChunk) {
    const int kc = static_cast<int>(std::min<int64_t>(P::kChunk, nb - i0));
    const size_t off = static_cast<size_t>(i0) * sizeof(Block);
    fill_side<P>(x, nt, i0, kc, side, sx);
    for (int64_t r0 = 0; r0 < nr; r0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, nr - r0));
      // Rows past nr repeat the last one: a partial group reads only its own rows.
      const uint8_t* rp[kRows];
      for (int l = 0; l < kRows; ++l) rp[l] = at(w, static_cast<size_t>(r0 + std::min(l, rows - 1)) * ws);
      // The next group's chunk, a line per row every other block (8 interleaved row streams
      // defeat the hardware prefetchers; prefetches never fault, past nr included).
      const uint8_t* next = at(w, static_cast<size_t>(r0 + kRows) * ws + off);
      for (int i = 0; i < kc; ++i) {
        if (i % 2 == 0)
          for (int l = 0; l < kRows; ++l)
            _mm_prefetch(reinterpret_cast<const char*>(next + l * ws + i * sizeof(Block)), _MM_HINT_T0);
        P::pack(rp, i0 + i, panel.q[i], &panel.d[i]);
      }
      const Tile base{0, i0, r0, rows, _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), lane), i0 == 0};
      for_each_balanced_tile(nt, P::kTok, [&](int t0, int tt) {
        Tile tl = base;
        tl.t0 = t0;
        run_tile<P>(tt, panel, kc, side, sx, x, y, tl);
      });
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

}  // namespace strata::x86::avx2
