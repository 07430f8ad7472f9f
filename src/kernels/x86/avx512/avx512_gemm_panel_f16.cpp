// AVX-512 many-token product (KernelTraits::gemm_panel) for F16 weights against F16 activations.
//
// The activations of 8 tokens are widened to f32 once per K chunk (exact) into an L1 scratch, so
// the register tile — 3 weight rows × 8 tokens, 24 f32 accumulators — spends per 16 elements
// three VCVTPH2PS on the weights and 24 FMAs whose activation operand comes straight from L1
// (the 4 × 4 tile converted both sides: 8 conversions per 16 FMAs). Products and sums stay in
// f32, as in vec_dot_f16; an element's arithmetic does not depend on nr, nt or on which rows and
// tokens share the call.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/avx512/avx512_panel.h"

namespace strata::x86::avx512 {
namespace {

constexpr int kR = 3;             // weight rows per register tile
constexpr int kT = 8;             // tokens per register tile
constexpr int64_t kChunk = 1024;  // K chunk (elements): 8 tokens × 4 KiB of f32 stay in L1

// y[t][r] (+)= Σ_k w_r[k]·xs[t][k] over one chunk of len elements; w_r = w + r·ws (f16),
// xs[t] = f32 rows kChunk apart.
// pf: the next tile's first row (same chunk offset), prefetched a line per row every 32 elements
// so its weights arrive from memory while this tile computes (null: none).
template <int R, int T>
void tile(int64_t len, const uint8_t* w, size_t ws, const float* xs, float* const* y, int64_t r0, bool first,
          const uint8_t* pf) {
  __m512 acc[R][T];
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  const uint16_t* wr[R];
#pragma GCC unroll 3
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const uint16_t*>(w + static_cast<size_t>(r) * ws);
  int64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    if (pf != nullptr && i % 32 == 0)
#pragma GCC unroll 3
      for (int r = 0; r < kR; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(pf + static_cast<size_t>(r) * ws + 2 * i), _MM_HINT_T0);
    __m512 wv[R];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r)
      wv[r] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[r] + i)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(xs + t * kChunk + i);
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (i < len) {
    const __mmask16 m = static_cast<__mmask16>((1u << (len - i)) - 1);
    __m512 wv[R];
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) wv[r] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, wr[r] + i));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, xs + t * kChunk + i);
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) {
      const float s = _mm512_reduce_add_ps(acc[r][t]);
      y[t][r0 + r] = first ? s : y[t][r0 + r] + s;
    }
}

using TileFn = void (*)(int64_t, const uint8_t*, size_t, const float*, float* const*, int64_t, bool,
                        const uint8_t*);

template <int R>
struct Row {
  static constexpr TileFn fns[kT] = {tile<R, 1>, tile<R, 2>, tile<R, 3>, tile<R, 4>,
                                     tile<R, 5>, tile<R, 6>, tile<R, 7>, tile<R, 8>};
};
static_assert(kR == 3, "tile table is 3 rows");
constexpr const TileFn* kTiles[kR] = {Row<1>::fns, Row<2>::fns, Row<3>::fns};

}  // namespace

void gemm_panel_f16(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                    float* const* y) {
  alignas(64) float xs[kT * kChunk];
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int64_t k0 = 0; k0 < n; k0 += kChunk) {
    const int64_t len = std::min(kChunk, n - k0);
    for (int t0 = 0; t0 < nt; t0 += kT) {
      const int tt = std::min(kT, nt - t0);
      for (int t = 0; t < tt; ++t) {
        const uint16_t* xh = static_cast<const uint16_t*>(x[t0 + t]) + k0;
        float* dst = xs + t * kChunk;
        int64_t i = 0;
        for (; i + 16 <= len; i += 16)
          _mm512_store_ps(dst + i,
                          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xh + i))));
        if (i < len) {
          const __mmask16 m = static_cast<__mmask16>((1u << (len - i)) - 1);
          _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, xh + i)));
        }
      }
      for (int64_t r = 0; r < nr; r += kR) {
        const int rr = static_cast<int>(std::min<int64_t>(kR, nr - r));
        const uint8_t* wr = wb + static_cast<size_t>(r) * ws + static_cast<size_t>(k0) * 2;
        const uint8_t* pf = r + 2 * kR <= nr ? wr + kR * ws : nullptr;
        kTiles[rr - 1][tt - 1](len, wr, ws, xs, y + t0, r, k0 == 0, pf);
      }
    }
  }
}

}  // namespace strata::x86::avx512
