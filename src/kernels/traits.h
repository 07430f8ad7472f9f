// The per-(type, ISA) kernel table (style.md §2, design.md principle 5): for each tensor type,
// the row conversions and the dot product against an activation row in its vec_dot_type, picked
// once for the CPU (base/cpu_features.h, lowered by STRATA_ISA=scalar|avx2|avx512).
// The scalar entries are quant/'s reference functions; SIMD entries override the ones they
// implement and are parity-tested against the scalar ones (tests/kernels).
#pragma once

#include "base/cpu_features.h"
#include "quant/qtypes.h"
#include "quant/quant_ref.h"

namespace strata {

// Register-tiled product of up to kGemmTileRows weight rows with up to kGemmTileTokens
// activation rows (in vec_dot_type): y[t][r] = W_r · x[t] for r < nr, t < nt, where W_r starts
// w_stride·r bytes after w. Each weight block is decoded once per tile. Equals vec_dot per
// element up to f32 summation order. PRECOND: 1 <= nr <= kGemmTileRows, 1 <= nt <= kGemmTileTokens,
// n % block_size == 0.
constexpr int kGemmTileRows = 4;
constexpr int kGemmTileTokens = 4;
using GemmTileFn = void (*)(int64_t n, const void* w, size_t w_stride, int nr, const void* const* x, int nt,
                            float* const* y);

// One-token product over any number of rows (decode): y[r] = W_r · x for 0 <= r < nr, W_r at
// w + w_stride·r, x one activation row in vec_dot_type. The kernel picks its own row blocking.
// Equals vec_dot per row up to f32 summation order. PRECOND: nr >= 1, n % block_size == 0.
using GemvFn = void (*)(int64_t n, const void* w, size_t w_stride, int64_t nr, const void* x, float* y);

// Many-token product (prefill) over any number of rows: y[t][r] = W_r · x[t] for 0 <= r < nr,
// 0 <= t < nt, W_r at w + w_stride·r, x[t] activation rows in vec_dot_type. The kernel packs
// weight rows into panels once and reuses them over all nt tokens. Equals vec_dot per element up
// to f32 summation order, and an element's arithmetic does not depend on nr, nt or on which
// rows and tokens share the call. PRECOND: nr >= 1, 1 <= nt <= kGemmPanelTokens,
// n % block_size == 0.
constexpr int kGemmPanelTokens = 64;
using GemmPanelFn = void (*)(int64_t n, const void* w, size_t w_stride, int64_t nr, const void* const* x,
                             int nt, float* const* y);

struct KernelTraits {
  GgmlType type = GgmlType::f32;
  GgmlType vec_dot_type = GgmlType::f32;
  ToFloatFn to_float = nullptr;      // exact dequantization of a row (bit-identical on every ISA)
  FromFloatFn from_float = nullptr;  // quantize a row; null when the type has no quantizer
  VecDotFn vec_dot = nullptr;        // weight row · activation row (in vec_dot_type); null if none
  GemmTileFn gemm = nullptr;         // tile of vec_dots; null: callers loop over vec_dot
  GemvFn gemv = nullptr;             // one-token rows (decode); null: gemm tiles or vec_dot
  GemmPanelFn gemm_panel = nullptr;  // many tokens (prefill); null: gemm tiles or vec_dot
  // gemv gives, per element, the bits of the many-token path (gemm_panel, else the tiles, else
  // vec_dot), so a batch-invariant matmul may use it for one token (tests/kernels
  // batch_invariance_test holds every table to it). False: one token goes the many-token way.
  bool gemv_invariant = false;
  Isa isa = Isa::scalar;  // the ISA level of this table

  bool supported() const { return to_float != nullptr; }
  bool can_matmul() const { return vec_dot != nullptr; }
};

// Traits for the active ISA (active_isa()), resolved once. Types strata cannot compute with
// give an entry with null functions (supported() == false).
const KernelTraits& kernel_traits(GgmlType t);

// Traits for an explicit ISA level (tests, benchmarks). The caller must check
// isa_supported(isa) before calling any function from an ISA the CPU lacks.
const KernelTraits& kernel_traits(GgmlType t, Isa isa);

}  // namespace strata
