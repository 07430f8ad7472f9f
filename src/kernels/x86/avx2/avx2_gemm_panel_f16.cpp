// AVX2 many-token products (KernelTraits::gemm_panel) for F16 weights against F16 activations
// and BF16 against BF16, for CPUs without AVX-512.
//
// The AVX-512 F16 panel (avx512_gemm_panel_f16.cpp) at half width, with its bits: there, each
// (row, token) element sums its products in one 16-lane f32 accumulator, lane j taking the
// positions ≡ j (mod 16) of a 1024-element K chunk, reduced per chunk into y. Here lane j < 8 and
// lane j ≥ 8 are two 8-lane sums that never meet before the reduction, so a register tile
// computes them one after the other — the "lo" pass over positions 16g..16g+7, the "hi" pass
// over 16g+8..16g+15 — and adds hi + lo lane by lane before the horizontal sum (the order of
// _mm512_reduce_add_ps). Same products, same chunk boundaries, same zero-padded tail, same
// reduction: bit-identical to the AVX-512 panel, and like it equal to vec_dot up to f32
// summation order; an element's arithmetic does not depend on nr, nt or on which rows and
// tokens share the call. BF16 runs the same code with a shift for the widening (exact too); it
// has no AVX-512 panel, so the AVX-512 table inherits this one (as fast as the AVX-512 BF16
// tiles at 8 tokens, faster at 64: BM_Gemm).
//
// The activations of up to 6 tokens are widened to f32 once per K chunk into an L1 scratch,
// each token's chunk de-interleaved into its lo and hi halves so both passes read it in order.
// 16 YMM registers: a tile of R rows × T tokens keeps R·T accumulators, R converted weight
// vectors and one activation vector live; per 8 positions it spends R conversions of weights
// and R·T FMAs (2 × 6 for the full tile: 2 conversions per 12 FMAs, where the 4 × 2 tiles of
// avx2_gemm.cpp convert 6 per 8). Tiles of fewer tokens take more rows, so that they still
// keep 8–12 independent FMA chains in flight.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/traits.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"

namespace strata::x86::avx2 {
namespace {

constexpr int kMaxT = 6;          // tokens per register tile
constexpr int kMaxR = 4;          // rows per register tile (tiles of few tokens)
constexpr int64_t kChunk = 1024;  // K chunk: the AVX-512 panel's (its reduction points)
constexpr int64_t kHalf = kChunk / 2;

// Rows per tile for T tokens: R·T accumulators + R weights + 1 activation ≤ 16 registers.
constexpr int rows_for(int t) {
  return t <= 2 ? 4 : t <= 4 ? 3 : 2;
}

// An empty asm the value passes through: keeps an activation vector in a register for the R
// FMAs that use it (GCC would fold the load into each FMA: R·T loads per step instead of T).
inline void pin(__m256& v) {
  asm("" : "+x"(v));
}

// 8 halves or bfloat16s at p → 8 f32 (exact).
struct F16 {
  static __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct Bf16 {
  static __m256 load8(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
};

// One half (Half 0: lo, 1: hi) of a tile's chunk: acc[r][t] = Σ_g w_r[16g + 8·Half + j]·x_t[same],
// lane j, over the chunk's groups of 16 positions, the last one zero-padded (wt, when rest).
// xh + t·kChunk: token t's widened half. pf: see tile.
template <class C, int R, int T, int Half>
inline void pass(int64_t groups, bool rest, const uint16_t* const* wr, const uint16_t (*wt)[16],
                 const float* xh, const uint8_t* pf, size_t ws, __m256 (&acc)[R][T]) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    if (Half == 0 && pf != nullptr && g % 2 == 0)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(pf + static_cast<size_t>(r) * ws + 32 * g), _MM_HINT_T0);
    __m256 wv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wv[r] = C::load8(wr[r] + 16 * g + 8 * Half);
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      __m256 xv = _mm256_load_ps(xh + t * kChunk + 8 * g);
      pin(xv);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (rest) {
    __m256 wv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wv[r] = C::load8(wt[r] + 8 * Half);
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_load_ps(xh + t * kChunk + 8 * groups);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
}

// y[t][r0 + r] (+)= Σ_k w_r[k]·x_t[k] over one chunk of len elements; w_r = w + r·ws (f16);
// xs + t·kChunk is token t's widened chunk, lo halves first ([8g, 8g+8) = positions
// 16g..16g+7), then hi halves at kHalf, zero-padded to a multiple of 16 positions.
// pf: the next tile's first row (same chunk offset), prefetched a line per row every 32 positions
// of the lo pass (null: none).
template <class C, int R, int T>
void tile(int64_t len, const uint8_t* w, size_t ws, const float* xs, float* const* y, int64_t r0, bool first,
          const uint8_t* pf) {
  const uint16_t* wr[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const uint16_t*>(w + static_cast<size_t>(r) * ws);
  const int64_t groups = len / 16, rest = len % 16;
  // The partial last group's weights, zero-padded (the AVX-512 panel's masked load).
  alignas(16) uint16_t wt[R][16];
  if (rest != 0) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      std::memset(wt[r], 0, sizeof wt[r]);
      std::memcpy(wt[r], wr[r] + groups * 16, static_cast<size_t>(rest) * sizeof(uint16_t));
    }
  }
  __m256 lo[R][T], hi[R][T];
  pass<C, R, T, 0>(groups, rest != 0, wr, wt, xs, pf, ws, lo);
  pass<C, R, T, 1>(groups, rest != 0, wr, wt, xs + kHalf, pf, ws, hi);
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float s = hsum_f32x8(_mm256_add_ps(hi[r][t], lo[r][t]));
      y[t][r0 + r] = first ? s : y[t][r0 + r] + s;
    }
}

using TileFn = void (*)(int64_t, const uint8_t*, size_t, const float*, float* const*, int64_t, bool,
                        const uint8_t*);

// kTiles[T − 1][R − 1] for R ≤ rows_for(T) (null above).
template <class C, int R, int T>
constexpr TileFn tile_or_null() {
  if constexpr (R <= rows_for(T))
    return tile<C, R, T>;
  else
    return nullptr;
}
template <class C, int T>
constexpr TileFn kRow[kMaxR] = {tile_or_null<C, 1, T>(), tile_or_null<C, 2, T>(), tile_or_null<C, 3, T>(),
                                tile_or_null<C, 4, T>()};
static_assert(kMaxT == 6 && kMaxR == 4, "tile table is 6 tokens × 4 rows");
template <class C>
constexpr const TileFn* kTiles[kMaxT] = {kRow<C, 1>, kRow<C, 2>, kRow<C, 3>,
                                         kRow<C, 4>, kRow<C, 5>, kRow<C, 6>};

// Token t's elements [k0, k0 + len) as f32, lo halves then hi halves (see tile), zero-padded.
template <class C>
void widen(const uint16_t* xh, int64_t len, float* dst) {
  const int64_t groups = len / 16, rest = len % 16;
  for (int64_t g = 0; g < groups; ++g) {
    _mm256_store_ps(dst + 8 * g, C::load8(xh + 16 * g));
    _mm256_store_ps(dst + kHalf + 8 * g, C::load8(xh + 16 * g + 8));
  }
  if (rest != 0) {
    alignas(16) uint16_t t[16] = {};
    std::memcpy(t, xh + 16 * groups, static_cast<size_t>(rest) * sizeof(uint16_t));
    _mm256_store_ps(dst + 8 * groups, C::load8(t));
    _mm256_store_ps(dst + kHalf + 8 * groups, C::load8(t + 8));
  }
}

template <class C>
void gemm_panel(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                float* const* y) {
  alignas(32) float xs[kMaxT * kChunk];
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  // Tiles of near-equal size (8 tokens: 4 + 4, not 6 + 2): each tile reuses its weight vectors.
  const int n_tiles = (nt + kMaxT - 1) / kMaxT;
  for (int64_t k0 = 0; k0 < n; k0 += kChunk) {
    const int64_t len = std::min(kChunk, n - k0);
    for (int k = 0, t0 = 0; k < n_tiles; ++k) {
      const int tt = (nt - t0) / (n_tiles - k);
      for (int t = 0; t < tt; ++t)
        widen<C>(static_cast<const uint16_t*>(x[t0 + t]) + k0, len, xs + t * kChunk);
      const int rmax = rows_for(tt);
      for (int64_t r = 0; r < nr; r += rmax) {
        const int rr = static_cast<int>(std::min<int64_t>(rmax, nr - r));
        const uint8_t* wr = wb + static_cast<size_t>(r) * ws + static_cast<size_t>(k0) * 2;
        const uint8_t* pf = r + 2 * rmax <= nr ? wr + rmax * ws : nullptr;
        kTiles<C>[tt - 1][rr - 1](len, wr, ws, xs, y + t0, r, k0 == 0, pf);
      }
      t0 += tt;
    }
  }
}

}  // namespace

void gemm_panel_f16(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                    float* const* y) {
  gemm_panel<F16>(n, w, ws, nr, x, nt, y);
}
void gemm_panel_bf16(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                     float* const* y) {
  gemm_panel<Bf16>(n, w, ws, nr, x, nt, y);
}

}  // namespace strata::x86::avx2
