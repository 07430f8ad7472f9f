// DeepSeek-V4 rotary embedding: NORM style (adjacent pairs (2i, 2i+1)) on the LAST n_rot dims
// of a row, with ggml's YaRN for compressed layers (deepseek-v4.md §2.3.6, fixtures README §6).
//
//   angle_i(p) = p * s^i, s = powf(base, -2/n_rot), accumulated by repeated f32 multiplication
//   (theta *= s) exactly as ggml-cpu does, so decode and prefill give identical angles.
//   YaRN: theta = (theta_e*freq_scale)*(1-ramp_i) + theta_e*ramp_i,
//         ramp_i = 1 - clamp((i - low)/max(0.001, high - low), 0, 1) (times ext_factor),
//         cos/sin multiplied by attn_factor * (1 + 0.1*ln(1/freq_scale)).
// DeepSeek-V4 passes attn_factor = 1/(1 + 0.1*ln(factor)) so the net magnitude is 1 (up to f32
// rounding, which we reproduce rather than skip).
#pragma once

#include <cstdint>

namespace strata::ds4 {

inline constexpr int kMaxRopeDims = 1024;  // rotated dims of one row (V4: 64)

struct RopeParams {
  int n_rot = 0;  // rotated dims (even), the last n_rot of each row
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1/factor under YaRN
  float ext_factor = 0.0f;  // 0: plain rope; 1: YaRN ramp
  float attn_factor = 1.0f;
  int n_ctx_orig = 0;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};

// Ratio-0 layers: plain rope with `base`.
RopeParams rope_plain(int n_rot, float base);
// Compressed layers (ratio != 0): YaRN with `factor` and `n_ctx_orig`, magnitude cancelled.
RopeParams rope_yarn(int n_rot, float base, float factor, int n_ctx_orig, float beta_fast = 32.0f,
                     float beta_slow = 1.0f);

// ggml_rope_yarn_corr_dims: {low, high} pair indices of the YaRN ramp.
void rope_yarn_corr_dims(const RopeParams& p, float dims[2]);

// cs[2i] = cos(theta_i)*mscale, cs[2i+1] = sin_sign*sin(theta_i)*mscale, i < n_rot/2.
// sin_sign = -1 gives the inverse rotation (ggml_rope_ext_back).
void rope_cache(const RopeParams& p, int64_t pos, float sin_sign, float* cs);

// Rotates the last p.n_rot dims of each of n_rows rows (row_len floats each, contiguous).
// PRECOND: row_len >= n_rot.
void rope_rows(const RopeParams& p, int64_t pos, float* x, int64_t n_rows, int64_t row_len, bool inverse);

// Same with a precomputed cache (rope_cache) — used when many rows share a position.
void rope_rows_cached(const float* cs, int n_rot, float* x, int64_t n_rows, int64_t row_len);

}  // namespace strata::ds4
