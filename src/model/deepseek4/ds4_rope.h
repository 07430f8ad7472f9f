// DeepSeek-V4 rotary embedding: kernels/ops.h's RoPE (the one definition: NORM style, adjacent
// pairs (2i, 2i+1), ggml's YaRN with the angles accumulated by repeated f32 multiplication) applied
// to the LAST n_rot dims of a row (deepseek-v4.md §2.3.6, fixtures README §6), with DeepSeek's
// parameter choices:
//   ratio-0 layers: plain rope; compressed layers: YaRN with attn_factor = 1/(1 + 0.1*ln(factor)),
//   which cancels ggml's YaRN magnitude (up to f32 rounding, which we reproduce rather than skip).
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace strata::ds4 {

inline constexpr int kMaxRopeDims = 1024;  // rotated dims of one row (V4: 64)

// Ratio-0 layers: plain rope with `base`.
RopeParams rope_plain(int n_rot, float base);
// Compressed layers (ratio != 0): YaRN with `factor` and `n_ctx_orig`, magnitude cancelled.
RopeParams rope_yarn(int n_rot, float base, float factor, int n_ctx_orig, float beta_fast = 32.0f,
                     float beta_slow = 1.0f);

// Rotates the last p.n_rot dims of each of n_rows rows (row_len floats each, contiguous).
// PRECOND: row_len >= n_rot.
void rope_rows(const RopeParams& p, int64_t pos, float* x, int64_t n_rows, int64_t row_len, bool inverse);

// Same with a precomputed cache (rope_cache) — used when many rows share a position.
void rope_rows_cached(const float* cs, int n_rot, float* x, int64_t n_rows, int64_t row_len);

}  // namespace strata::ds4
