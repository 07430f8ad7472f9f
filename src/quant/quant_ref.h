// Scalar reference conversions and dot products per tensor type, byte-exact with ggml's block
// layouts and following ggml-cpu's numerics (see ../shared/fixtures/README.md §6). Every SIMD
// kernel in kernels/x86 is tested against these.
//
// Conventions for every function here:
//   n      elements in the row; PRECOND: n % block_size(type) == 0 (checked by the callers that
//          take input from outside: matmul, dequantize_row).
//   src/w  a row of blocks of the given type, dst/x likewise; no alignment required.
//   vec_dot(n, w, x) = Σ_i w_i·x_i with w a weight row and x an activation row already in the
//          weight type's vec_dot_type (F32→F32, F16→F16, BF16→BF16, Q4_0/Q8_0/MXFP4/NVFP4→Q8_0,
//          Q4_K/Q6_K→Q8_K), computed with ggml's per-block integer sums and float scaling.
#pragma once

#include <cstdint>

#include "quant/fp8_fp4.h"
#include "quant/qtypes.h"

namespace strata {

using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);
using VecDotFn = float (*)(int64_t n, const void* w, const void* x);

// One type's scalar reference functions; from_float may be null (no quantizer).
struct QuantRef {
  GgmlType type;
  GgmlType vec_dot_type;
  ToFloatFn to_float;
  FromFloatFn from_float;
  VecDotFn vec_dot;  // null for activation-only types (Q8_K)
};

// The reference entry for a type, or nullptr when strata cannot compute with it.
const QuantRef* quant_ref(GgmlType t);

// --- plain float types -------------------------------------------------------------------
void to_float_f32(const void* src, float* dst, int64_t n);
void from_float_f32(const float* src, void* dst, int64_t n);
float vec_dot_f32(int64_t n, const void* w, const void* x);  // Σ in double of f32 products

void to_float_f16(const void* src, float* dst, int64_t n);
void from_float_f16(const float* src, void* dst, int64_t n);  // round to nearest even (F16C)
float vec_dot_f16(int64_t n, const void* w, const void* x);   // Σ in double of f32 products

void to_float_bf16(const void* src, float* dst, int64_t n);
void from_float_bf16(const float* src, void* dst, int64_t n);  // round to nearest even
float vec_dot_bf16(int64_t n, const void* w, const void* x);   // Σ in double of f32 products

// --- 32-element block types --------------------------------------------------------------
void to_float_q8_0(const void* src, float* dst, int64_t n);
// Activation quantizer as the x86 AVX2/AVX-512 ggml build does it: d = amax/127 (stored fp16),
// q = round_half_even(x · (127/amax)).
void from_float_q8_0(const float* src, void* dst, int64_t n);
float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* x);

void to_float_q4_0(const void* src, float* dst, int64_t n);
void from_float_q4_0(const float* src, void* dst, int64_t n);  // ggml's quantize_row_q4_0_ref
float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* x);

// IQ4_NL: Q4_0's blocks, but value = d·kIq4NlValues[nibble] (ggml's non-linear 4-bit grid).
// from_float: per block, the scale and indices that best fit the values in least squares (weights
// x²) among candidate scales around max / −127 (max: the value of largest magnitude).
extern const int8_t kIq4NlValues[16];
void to_float_iq4_nl(const void* src, float* dst, int64_t n);
void from_float_iq4_nl(const float* src, void* dst, int64_t n);
float vec_dot_iq4_nl_q8_0(int64_t n, const void* w, const void* x);  // as vec_dot_q4_0_q8_0

// value = kMxfp4Values2x[nibble] · e8m0_to_f32_half(e) = E2M1 · 2^(e−127) (both from quant/fp8_fp4.h).
void to_float_mxfp4(const void* src, float* dst, int64_t n);
void from_float_mxfp4(const float* src, void* dst, int64_t n);  // ggml's quantize_row_mxfp4_ref
float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* x);

// FP8 KV rows (quant/fp8_kv.cpp, BlockFp8E4m3): value = E4M3 · 2^(e−127). from_float picks the
// scale as the DeepSeek reference does for its FP8 KV (ue8m0_ceil(max(amax, 1e-4) / 448)) and rounds
// each value to the nearest E4M3. No vec_dot: the attention reads the rows as f32 (kv_row_ops).
void to_float_fp8_e4m3(const void* src, float* dst, int64_t n);
void from_float_fp8_e4m3(const float* src, void* dst, int64_t n);

// NVFP4 (quant/nvfp4.cpp): value = kMxfp4Values2x[nibble] · kNvfp4ScaleHalf[d[s]] = E2M1 · UE4M3,
// a scale per 16 elements; vec_dot against the block's two Q8_0 activation blocks.
void to_float_nvfp4(const void* src, float* dst, int64_t n);
// Per 16-element sub-block, the UE4M3 scale of least squared error among the code nearest amax/6,
// the five around it and the codes nearest amax/v for the other E2M1 magnitudes v (so MXFP4's
// values convert exactly where the scale is in UE4M3's range); elements round to nearest E2M1.
void from_float_nvfp4(const float* src, void* dst, int64_t n);
float vec_dot_nvfp4_q8_0(int64_t n, const void* w, const void* x);

// --- 256-element super-block types -------------------------------------------------------
// Q8_K: d = 1/iscale (f32), iscale = −127/max where max is the first element of largest |x|,
// q = min(127, round_half_even(iscale·x)), bsums[j] = Σ q[16j..16j+15].
void to_float_q8_k(const void* src, float* dst, int64_t n);
void from_float_q8_k(const float* src, void* dst, int64_t n);

// Q4_K: 8 sub-blocks of 32 with 6-bit scale and min; element e of a super-block is nibble
// (e % 64 < 32 ? low : high) of qs[32·(e/64) + e % 32]. value = d·sc·q − dmin·m.
void q4_k_scale_min(const uint8_t scales[12], int j, uint8_t* sc, uint8_t* m);
void to_float_q4_k(const void* src, float* dst, int64_t n);
void from_float_q4_k(const float* src, void* dst, int64_t n);  // simple min/max fit (tests, synth)
float vec_dot_q4_k_q8_k(int64_t n, const void* w, const void* x);

// Q6_K: 16 sub-blocks of 16 with int8 scales; q = (4 low bits | 2 high bits << 4) − 32.
void to_float_q6_k(const void* src, float* dst, int64_t n);
void from_float_q6_k(const float* src, void* dst, int64_t n);  // simple absmax fit (tests, synth)
float vec_dot_q6_k_q8_k(int64_t n, const void* w, const void* x);

}  // namespace strata
