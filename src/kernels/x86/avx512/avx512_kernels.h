// AVX-512 (F, BW, VL, DQ, VNNI, BF16) kernels, compiled with those flags only; callers check the
// CPU first. Same contracts as quant/quant_ref.h: conversions and quantizers are bit-identical
// to the scalar references, K-quant dot products too; the other dot products equal them up to
// f32 summation order (bf16 via VDPBF16PS, which also flushes subnormal inputs to zero).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/traits.h"

namespace strata {
struct OpsTable;
}  // namespace strata

namespace strata::x86::avx512 {

// Overwrites the element-wise ops this level implements (kernels/ops.h), avx512_ops.cpp.
void fill_ops(OpsTable* t);
// Σ s·v over typed KV rows (OpsTable::kv_*.add_scaled_rows), avx512_kv_rows.cpp.
void fill_kv_row_ops(OpsTable* t);
// The block types' q·k and Σ s·v (q8_0, q4_0, iq4_nl, VNNI), avx512_kv_quant.cpp; called by
// fill_kv_row_ops.
void fill_kv_quant_ops(OpsTable* t);

float vec_dot_f32(int64_t n, const void* w, const void* x);
float vec_dot_f16(int64_t n, const void* w, const void* x);
float vec_dot_bf16(int64_t n, const void* w, const void* x);
void to_float_f16(const void* src, float* dst, int64_t n);
void from_float_f16(const float* src, void* dst, int64_t n);
void to_float_bf16(const void* src, float* dst, int64_t n);
void from_float_bf16(const float* src, void* dst, int64_t n);
// DeepSeek's KV rows (fp8_e4m3, mxfp4) to f32, bit-identical to quant/'s, avx512_kv_float.cpp.
void to_float_fp8_e4m3(const void* src, float* dst, int64_t n);
void to_float_mxfp4(const void* src, float* dst, int64_t n);

void from_float_q8_0(const float* src, void* dst, int64_t n);
void from_float_q8_k(const float* src, void* dst, int64_t n);

float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* x);
// NVFP4, avx512_nvfp4.cpp: gemv equals vec_dot bit for bit (gemv_invariant: NVFP4 has no tiles).
float vec_dot_nvfp4_q8_0(int64_t n, const void* w, const void* x);
void gemv_nvfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
float vec_dot_q4_k_q8_k(int64_t n, const void* w, const void* x);
float vec_dot_q6_k_q8_k(int64_t n, const void* w, const void* x);

// Register tiles (kernels/traits.h GemmTileFn), avx512_gemm.cpp.
void gemm_q8_0_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y);
void gemm_q4_0_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y);
void gemm_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                     float* const* y);
void gemm_f16(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt, float* const* y);
void gemm_bf16(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt, float* const* y);

// One-token products (kernels/traits.h GemvFn): the 32-element block types with the panel's bits,
// avx512_gemv_q.cpp; F16, avx512_gemv_f16.cpp; BF16, avx512_gemv.cpp.
void gemv_q8_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
void gemv_q4_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
void gemv_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
// avx512_gemv_f16.cpp: the F16 panel's bits with one token (gemv_invariant).
void gemv_f16(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
void gemv_bf16(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
// K-quant one-token products against Q8_K, bit-identical to vec_dot, avx512_gemv_k.cpp.
void gemv_q4_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
void gemv_q6_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
// K-quant register tiles against Q8_K, bit-identical to vec_dot, avx512_gemm_k.cpp.
void gemm_q4_k_q8_k(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y);
void gemm_q6_k_q8_k(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y);
// K-quant many-token panels against Q8_K, bit-identical to vec_dot, avx512_gemm_panel_k.cpp.
void gemm_panel_q4_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y);
void gemm_panel_q6_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y);

}  // namespace strata::x86::avx512
