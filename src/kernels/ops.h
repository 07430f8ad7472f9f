// Elementwise and row-wise ops of the forward pass: RMSNorm, RoPE (NORM / NEOX, YaRN), softmax
// (scale, additive mask, attention sinks), SiLU / SwiGLU (+ gpt-oss clamps), softplus, top-k.
//
// Scalar code that follows ggml-cpu's numerics (fixtures README §6) so that strata's f32 path
// lands within ~1e-6 of llama.cpp: sums of squares and softmax denominators accumulate in
// double, RoPE angles are built by repeated f32 multiplication, cos/sin in f32.
//
// The hot element-wise ops go through an OpsTable picked once by CPUID (like KernelTraits,
// lowered by STRATA_ISA): the scalar code here is the reference and the scalar ISA; AVX2 and
// AVX-512 versions live in kernels/x86/<isa>/<isa>_ops.cpp (tests/kernels/ops_simd_test.cpp).
#pragma once

#include <cstdint>

#include "base/cpu_features.h"
#include "quant/qtypes.h"

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

// ggml_rope_yarn_corr_dims: {low, high} pair indices of the YaRN ramp.
void rope_yarn_corr_dims(const RopeParams& p, float dims[2]);

// The one RoPE of strata (standard decoders and deepseek4 alike; V4.1's reference path keeps its
// own f32 cos/sin of the official code). The cos/sin table of one position: cache[2i] = cos θ_i·m,
// cache[2i+1] = sin θ_i·m·sin_sign, i < n_rot/2. sin_sign = -1 gives the inverse rotation. cache: [n_rot]
// f32.
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

// The orthonormal Walsh-Hadamard transform (entries ±1/sqrt(b)) in place over each block of b
// values of x[0..n), b = hadamard_block(n) (the largest power of two dividing n, at most 256):
// symmetric and its own inverse, so q·k and Σ p·v survive rotating q, k, v and the output.
// Quantized KV rows are stored rotated (llama.cpp's attention rotation): outliers spread.
int64_t hadamard_block(int64_t n);
void hadamard_rotate(float* x, int64_t n);

// ---------------------------------------------------------------------------------- dispatch
// Attention's per-key products over KV rows of one element type (kernels/kv_rows.h), read in
// place. Row pointers address a head's values (whole blocks); n <= kKvRowMaxWidth. Every ISA's
// kernels are bit-identical to the scalar reference (kernels/kv_row_ops.cpp), which defines:
// - f16 / bf16: OpsTable::dot_f32_rows / vec_add_scaled_rows over the rows converted to f32 by
//   quant/'s to_float (exact per value);
// - block types (q8_0, q4_0, iq4_nl; 32 values and an fp16 scale d per block): q·k as ggml's
//   vec_dot of the row with the query quantized to Q8_0 (quant/'s from_float_q8_0): per block the
//   exact int32 Σ k_i·q_i, then sum += float(Σ) · (d_k · d_q) in f32, blocks in order (what
//   llama.cpp's CPU attention computes); Σ p·v as y_i = fma(s_j · d, v_i, y_i) per key in key
//   order (v_i the block's integer or grid value, one rounding of s_j · d per block and key).
constexpr int64_t kKvRowMaxWidth = 1024;
struct KvRowOps {
  void (*dot_rows)(const float* q, const void* const* k, int64_t nk, int64_t n, float* out) = nullptr;
  void (*add_scaled_rows)(float* y, const void* const* x, const float* s, int64_t nk, int64_t n) = nullptr;
};

// The element-wise kernels of one ISA level. Contracts against the scalar entries:
// - bit-identical: vec_add, vec_add_scaled, dot_f32 (same 8 f32 lanes, same double reduction)
//   and their row forms, rope_apply;
// - exp-based entries (exp, exp_shift_sum, swiglu*, softmax_scaled) use a polynomial expf
//   within 2 ulp of std::exp (exact 0 for -inf, +inf past 88.72, NaN kept, subnormals rounded
//   once); everything around the exp is the scalar arithmetic, so outputs differ by a few ulp;
// - rms_norm and softmax_scaled keep their double sums but add them in another order
//   (results differ from the scalar ones in the last bit at most, rarely).
struct OpsTable {
  void (*rms_norm)(const float* x, const float* w, float* y, int64_t n, float eps) = nullptr;
  void (*softmax_scaled)(float* x, int64_t n, float scale, const float* mask, const float* sink) = nullptr;
  void (*swiglu)(const float* g, const float* u, float* out, int64_t n) = nullptr;
  void (*swiglu_oai)(const float* g, const float* u, float* out, int64_t n, float alpha,
                     float limit) = nullptr;
  void (*swiglu_clamped)(const float* g, const float* u, float* out, int64_t n, float limit) = nullptr;
  void (*vec_add)(float* y, const float* x, int64_t n) = nullptr;
  void (*vec_add_scaled)(float* y, const float* x, float s, int64_t n) = nullptr;
  float (*dot_f32)(const float* a, const float* b, int64_t n) = nullptr;
  // Attention's per-key products over nk rows (keys or values, any addresses), bit-identical to a
  // loop of dot_f32 / vec_add_scaled: out[j] = dot_f32(q, k[j], n); then y += s[j]·x[j] for
  // j = 0, 1, ... in that order.
  void (*dot_f32_rows)(const float* q, const float* const* k, int64_t nk, int64_t n, float* out) = nullptr;
  void (*vec_add_scaled_rows)(float* y, const float* const* x, const float* s, int64_t nk,
                              int64_t n) = nullptr;
  // The same over f16 / bf16 / q8_0 / q4_0 / iq4_nl / fp8_e4m3 / mxfp4 rows (f32 rows use the two
  // above). fp8_e4m3 and mxfp4 (DeepSeek's KV types): each row converted to f32, as f16's.
  KvRowOps kv_f16, kv_bf16, kv_q8_0, kv_q4_0, kv_iq4_nl, kv_fp8, kv_mxfp4;
  const KvRowOps& kv_rows(GgmlType t) const;  // PRECOND: one of those seven
  void (*rope_apply)(RopeStyle style, int n_rot, const float* cache, float* x) = nullptr;
  // y[i] = e^x[i]. y may alias x.
  void (*exp)(const float* x, float* y, int64_t n) = nullptr;
  // x[i] = e^(x[i] − shift) in place; returns their f32 sum (attention's online softmax).
  float (*exp_shift_sum)(float* x, int64_t n, float shift) = nullptr;
  Isa isa = Isa::scalar;
};

// The table for the active ISA (active_isa()), resolved once; the functions above call it.
const OpsTable& ops_table();
// The table of an explicit ISA level (tests, benchmarks). The caller must check
// isa_supported(isa) before calling a function of an ISA the CPU lacks.
const OpsTable& ops_table(Isa isa);

// ---------------------------------------------------------------------------------- top-k
// The indices of the k largest values of x[0..n) in descending order; ties keep the lower index
// first (a stable descending sort, like ggml's argsort). PRECOND: 0 < k <= n.
void top_k(const float* x, int n, int k, int32_t* idx_out);

}  // namespace strata
