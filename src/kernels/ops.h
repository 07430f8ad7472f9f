// Elementwise and row-wise ops of the forward pass: RMSNorm, RoPE (NORM / NEOX, YaRN), softmax
// (scale, additive mask, attention sinks), SiLU / SwiGLU (+ gpt-oss clamps), softplus, top-k.
//
// Scalar code that follows ggml-cpu's numerics (fixtures README §6) so that strata's f32 path
// lands within ~1e-6 of llama.cpp: sums of squares and softmax denominators accumulate in
// double, RoPE angles are built by repeated f32 multiplication, cos/sin in f32.
#pragma once

#include <cstdint>

namespace strata {

// ---------------------------------------------------------------------------------- norms
// y[i] = x[i] * 1/sqrt(mean(x²) + eps) * w[i]   (w may be nullptr: no weight). y may alias x.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

// ---------------------------------------------------------------------------------- rope
enum class RopeStyle {
  rope_style_norm,  // rotate adjacent pairs (2i, 2i+1) (llama, deepseek)
  rope_style_neox,  // rotate (i, i + n_rot/2) (qwen, gpt-oss)
};

struct RopeParams {
  int n_rot = 0;  // rotated dims (even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   // 1/factor for linear / YaRN scaling
  float ext_factor = 0.0f;   // YaRN extrapolation mix (1 with YaRN, 0 without)
  float attn_factor = 1.0f;  // multiplies cos and sin
  int n_ctx_orig = 0;        // YaRN original context
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};

// The cos/sin table of one position: cache[2i] = cos θ_i·m, cache[2i+1] = sin θ_i·m·sin_sign,
// i < n_rot/2. sin_sign = -1 gives the inverse rotation. cache: [n_rot] f32.
void rope_cache(const RopeParams& p, int64_t pos, float sin_sign, float* cache);

// Rotates the first n_rot values of x in place using a cache from rope_cache. Callers offset x
// to rotate a tail (deepseek: x + (head_dim - n_rot)).
void rope_apply(RopeStyle style, int n_rot, const float* cache, float* x);

// ---------------------------------------------------------------------------------- softmax
// In place over n values: x = softmax(x). Max-subtracted, sum in double. -inf entries give 0.
void softmax_inplace(float* x, int64_t n);

// Attention-row softmax: x[j] = x[j]*scale (+ mask[j] if mask) then softmax; when `sink` is
// non-null, *sink joins the max and the denominator (not the outputs). Masked (-inf) entries
// give exactly 0. Returns nothing; PRECOND: at least one finite entry or a sink.
void softmax_scaled(float* x, int64_t n, float scale, const float* mask, const float* sink);

// ---------------------------------------------------------------------------------- activations
float silu(float x);       // x / (1 + e^-x)
float sigmoid_f(float x);  // 1 / (1 + e^-x)
float softplus(float x);   // x > 20 ? x : log(1 + e^x)

// out[i] = silu(g[i]) * u[i]. out may alias g or u.
void swiglu(const float* g, const float* u, float* out, int64_t n);
// gpt-oss: g' = min(g, limit), u' = clamp(u, -limit, limit), out = g'·σ(alpha·g')·(u' + 1).
void swiglu_oai(const float* g, const float* u, float* out, int64_t n, float alpha, float limit);
// deepseek-style clamped swiglu: out = silu(min(g, limit)) * clamp(u, -limit, limit).
void swiglu_clamped(const float* g, const float* u, float* out, int64_t n, float limit);

// ---------------------------------------------------------------------------------- vectors
void vec_add(float* y, const float* x, int64_t n);                  // y += x
void vec_add_scaled(float* y, const float* x, float s, int64_t n);  // y += s*x
float dot_f32(const float* a, const float* b, int64_t n);           // f32 dot (8 f32 lanes, then double)

// ---------------------------------------------------------------------------------- top-k
// The indices of the k largest values of x[0..n) in descending order; ties keep the lower index
// first (a stable descending sort, like ggml's argsort). PRECOND: 0 < k <= n.
void top_k(const float* x, int n, int k, int32_t* idx_out);

}  // namespace strata
