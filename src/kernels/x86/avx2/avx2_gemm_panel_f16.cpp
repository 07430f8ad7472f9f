// AVX2 many-token product (KernelTraits::gemm_panel) for F16 weights against F16 activations, for
// CPUs without AVX-512.
//
// Per element, the arithmetic of the AVX2 one-token kernel gemv_f16 (avx2_gemv.cpp), so prefill
// and decode give the same bits (a MoE's near-tied routing cannot tip differently between them):
// per 2048-element segment of K, one 8-lane f32 accumulator of FMAs over the segment's multiple
// of 8, its horizontal sum, the segment's last n % 8 products added in scalar f32, and y = the
// first segment's sum, then y + each further one. (For n ≤ 2048 also the bits of the 4 × 4 tiles
// of avx2_gemm.cpp.) An element's arithmetic does not depend on nr, nt or on which rows and tokens
// share the call, and equals vec_dot up to f32 summation order.
//
// The activations of up to 6 tokens are widened to f32 once per 1024-element sub-segment into an
// L1 scratch (6 × 4 KiB); when a segment has two, the accumulators of a block of 48 rows carry
// from the first to the second through a small buffer. 16 YMM registers: a register tile of
// R rows × T tokens keeps R·T accumulators, R converted weight vectors and one activation vector
// live; per 8 positions it spends R VCVTPH2PS on the weights and R·T FMAs (2 × 6 for the full
// tile: 2 conversions per 12 FMAs, where the 4 × 2 passes of avx2_gemm.cpp convert 6 per 8).
// Tiles of fewer tokens take more rows, so that they still keep 8–12 FMA chains in flight.
#include <immintrin.h>

#include <algorithm>

#include "kernels/traits.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/tile_table.h"

namespace strata::x86::avx2 {
namespace {

constexpr int kMaxT = 6;        // tokens per register tile
constexpr int kMaxR = 4;        // rows per register tile (tiles of few tokens)
constexpr int64_t kSeg = 2048;  // K segment: avx2_gemv.cpp's kFloatSeg (where y takes a partial sum)
constexpr int64_t kSub = 1024;  // activations widened per sub-segment: 6 tokens × 4 KiB stay in L1
constexpr int64_t kBlock = 48;  // rows whose accumulators carry across a segment's sub-segments
static_assert(kSeg == 2 * kSub && kBlock % 12 == 0, "two sub-segments; blocks of whole 2-, 3-, 4-row tiles");

// Rows per tile for T tokens: R·T accumulators + R weights + 1 activation ≤ 16 registers.
constexpr int rows_for(int t) {
  return t <= 2 ? 4 : t <= 4 ? 3 : 2;
}

// An empty asm the value passes through: keeps an activation vector in a register for the R
// FMAs that use it (GCC would fold the load into each FMA: R·T loads per step instead of T).
inline void pin(__m256& v) {
  asm("" : "+x"(v));
}

inline __m256 f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// One register tile's share of a sub-segment.
struct Step {
  int64_t vlen;            // positions in 8-lane steps (a multiple of 8)
  int64_t tail;            // scalar positions after them (the segment's n % 8; last sub-segment only)
  const float* xs;         // token t's widened sub-segment at xs + t·kSub (vlen + tail values)
  __m256 (*carry)[kMaxT];  // accumulators carried across sub-segments, [row][token] (null: none)
  bool resume;             // start from carry (else from zero)
  bool last;               // the segment's last sub-segment: finish into y (else store to carry)
  bool add;                // not the first segment: y += the sum (else y = it)
  const uint8_t* pf;       // the next tile's first row at this sub-segment (null: none)
};

// Rows w + r·ws (f16, at the sub-segment's start) × tokens: the segment's sums into y[t][r0 + r].
// The prefetch takes a line per row every 32 positions, so the next tile's weights arrive from
// memory while this one computes.
template <int R, int T>
void tile(const uint8_t* w, size_t ws, float* const* y, int64_t r0, const Step& s) {
  const uint16_t* wr[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const uint16_t*>(w + static_cast<size_t>(r) * ws);
  __m256 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) acc[r][t] = s.resume ? s.carry[r][t] : _mm256_setzero_ps();
  for (int64_t i = 0; i < s.vlen; i += 8) {
    if (s.pf != nullptr && i % 32 == 0)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(s.pf + static_cast<size_t>(r) * ws + 2 * i), _MM_HINT_T0);
    __m256 wv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wv[r] = f16x8(wr[r] + i);
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      __m256 xv = _mm256_load_ps(s.xs + t * kSub + i);
      pin(xv);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (!s.last) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 6
      for (int t = 0; t < T; ++t) s.carry[r][t] = acc[r][t];
    return;
  }
  // gemv_f16's finish, expression for expression.
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    const float* xf = s.xs + t * kSub + s.vlen;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      float sum = hsum_f32x8(acc[r][t]);
      for (int64_t j = 0; j < s.tail; ++j) sum += h2f(wr[r][s.vlen + j]) * xf[j];
      float* yr = y[t] + r0 + r;
      *yr = s.add ? *yr + sum : sum;
    }
  }
}

using TileFn = void (*)(const uint8_t*, size_t, float* const*, int64_t, const Step&);

// kTiles[T − 1][R − 1] for R ≤ rows_for(T) (null above).
template <int R, int T>
constexpr TileFn tile_or_null() {
  if constexpr (R <= rows_for(T))
    return tile<R, T>;
  else
    return nullptr;
}
template <int T>
constexpr TileFn kRow[kMaxR] = {tile_or_null<1, T>(), tile_or_null<2, T>(), tile_or_null<3, T>(),
                                tile_or_null<4, T>()};
static_assert(kMaxT == 6 && kMaxR == 4, "tile table is 6 tokens × 4 rows");
constexpr const TileFn* kTiles[kMaxT] = {kRow<1>, kRow<2>, kRow<3>, kRow<4>, kRow<5>, kRow<6>};

// len halves → f32 (exact), 8 at a time, the rest one by one.
void widen(const uint16_t* xh, int64_t len, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) _mm256_store_ps(dst + i, f16x8(xh + i));
  for (; i < len; ++i) dst[i] = h2f(xh[i]);
}

}  // namespace

void gemm_panel_f16(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                    float* const* y) {
  alignas(32) float xs[kMaxT * kSub];
  alignas(32) __m256 carry[kBlock][kMaxT];
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int64_t k0 = 0; k0 < n; k0 += kSeg) {
    const int64_t len = std::min(kSeg, n - k0), len8 = len / 8 * 8;
    // One sub-segment: no carry, so no row blocks either (the activations are widened once).
    const int64_t block = len <= kSub ? nr : kBlock;
    // Tiles of near-equal size (8 tokens: 4 + 4, not 6 + 2): each tile reuses its weight vectors.
    for_each_balanced_tile(nt, kMaxT, [&](int t0, int tt) {
      const int rmax = rows_for(tt);
      for (int64_t b0 = 0; b0 < nr; b0 += block) {
        const int64_t b1 = std::min(nr, b0 + block);
        for (int64_t s0 = 0; s0 < len; s0 += kSub) {
          const int64_t s1 = std::min(len, s0 + kSub);
          for (int t = 0; t < tt; ++t)
            widen(static_cast<const uint16_t*>(x[t0 + t]) + k0 + s0, s1 - s0, xs + t * kSub);
          Step st;
          st.vlen = std::min(len8, s1) - s0;
          st.tail = s1 == len ? len - len8 : 0;
          st.xs = xs;
          st.resume = s0 > 0;
          st.last = s1 == len;
          st.add = k0 > 0;
          const uint8_t* wseg = wb + static_cast<size_t>(k0 + s0) * 2;
          for (int64_t r = b0; r < b1; r += rmax) {
            const int rr = static_cast<int>(std::min<int64_t>(rmax, b1 - r));
            const uint8_t* wr = wseg + static_cast<size_t>(r) * ws;
            st.carry = len <= kSub ? nullptr : carry + (r - b0);
            st.pf = r + 2 * rmax <= nr ? wr + rmax * ws : nullptr;
            kTiles[tt - 1][rr - 1](wr, ws, y + t0, r, st);
          }
        }
      }
    });
  }
}

}  // namespace strata::x86::avx2
