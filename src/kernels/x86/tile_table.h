// Dispatch of register tiles instantiated per shape: K<R, T>::f is the kernel for R weight rows
// × T tokens (R ≤ kGemmTileRows = 4, T ≤ MaxT). pick_tile returns the instantiation for a
// runtime (nr, nt); run_in_passes covers up to kGemmTileTokens tokens with passes of at most
// MaxT tokens (AVX2's 16 registers hold 4 rows × 2 tokens). Header-only: each ISA's file
// instantiates it with its own kernels.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/traits.h"

namespace strata::x86 {

using TileFn = void (*)(int64_t, const void*, size_t, const void* const*, float* const*);

template <template <int, int> class K, int MaxT, int... I>
constexpr std::array<TileFn, sizeof...(I)> tile_fns(std::integer_sequence<int, I...>) {
  return {K<I / MaxT + 1, I % MaxT + 1>::f...};
}

// PRECOND: 1 <= nr <= kGemmTileRows, 1 <= nt <= MaxT.
template <template <int, int> class K, int MaxT>
TileFn pick_tile(int nr, int nt) {
  static constexpr auto fns = tile_fns<K, MaxT>(std::make_integer_sequence<int, kGemmTileRows * MaxT>{});
  return fns[static_cast<size_t>((nr - 1) * MaxT + (nt - 1))];
}

// The tile as passes of up to MaxT tokens; `len` is what the kernels take as their length.
template <template <int, int> class K, int MaxT>
void run_in_passes(int64_t len, const void* w, size_t ws, int nr, const void* const* x, int nt,
                   float* const* y) {
  for (int t0 = 0; t0 < nt; t0 += MaxT) {
    const int k = nt - t0 < MaxT ? nt - t0 : MaxT;
    pick_tile<K, MaxT>(nr, k)(len, w, ws, x + t0, y + t0);
  }
}

// Splits nt tokens into ceil(nt / max_t) tiles of near-equal size (5 tokens by 4: 3 + 2, not
// 4 + 1), so every tile reuses each weight load; calls f(t0, tt) for each, in order.
template <class F>
void for_each_balanced_tile(int nt, int max_t, F&& f) {
  const int n_tiles = (nt + max_t - 1) / max_t;
  for (int k = 0, t0 = 0; k < n_tiles; ++k) {
    const int tt = (nt - t0) / (n_tiles - k);
    f(t0, tt);
    t0 += tt;
  }
}

// A many-token product over any rows and up to kGemmPanelTokens tokens by a 4×4 tile kernel: the
// panels' path for calls with too few tokens to pay for their transposes (the K-quant panels of
// both ISAs). The tiles are bit-identical to vec_dot, as those panels are.
template <GemmTileFn Tile>
void gemm_by_tiles(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                   float* const* y) {
  float* yt[kGemmTileTokens];
  for (int64_t r = 0; r < nr; r += kGemmTileRows) {
    const int rows = nr - r < kGemmTileRows ? static_cast<int>(nr - r) : kGemmTileRows;
    for (int t0 = 0; t0 < nt; t0 += kGemmTileTokens) {
      const int k = nt - t0 < kGemmTileTokens ? nt - t0 : kGemmTileTokens;
      for (int i = 0; i < k; ++i) yt[i] = y[t0 + i] + r;
      Tile(n, static_cast<const uint8_t*>(w) + static_cast<size_t>(r) * ws, ws, rows, x + t0, k, yt);
    }
  }
}

}  // namespace strata::x86
