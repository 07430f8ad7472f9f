// AVX2 + FMA + F16C kernels (compiled with those flags only; callers check the CPU first).
// Same contracts as the scalar references in quant/quant_ref.h: conversions and quantizers are
// bit-identical to them; dot products equal them up to f32 summation order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata {
struct OpsTable;
}  // namespace strata

namespace strata::x86::avx2 {

// Overwrites the element-wise ops this level implements (kernels/ops.h), avx2_ops.cpp.
void fill_ops(OpsTable* t);
// The typed KV row products (OpsTable::kv_*), avx2_kv_rows.cpp.
void fill_kv_row_ops(OpsTable* t);
// The block types' ones (q8_0, q4_0, iq4_nl), avx2_kv_quant.cpp; called by fill_kv_row_ops.
void fill_kv_quant_ops(OpsTable* t);

float vec_dot_f32(int64_t n, const void* w, const void* x);
float vec_dot_f16(int64_t n, const void* w, const void* x);
float vec_dot_bf16(int64_t n, const void* w, const void* x);
void to_float_f16(const void* src, float* dst, int64_t n);
void from_float_f16(const float* src, void* dst, int64_t n);
void to_float_bf16(const void* src, float* dst, int64_t n);
void from_float_bf16(const float* src, void* dst, int64_t n);
// DeepSeek's KV rows (fp8_e4m3, mxfp4) to f32, bit-identical to quant/'s, avx2_kv_float.cpp.
void to_float_fp8_e4m3(const void* src, float* dst, int64_t n);
void to_float_mxfp4(const void* src, float* dst, int64_t n);

void from_float_q8_0(const float* src, void* dst, int64_t n);
void from_float_q8_k(const float* src, void* dst, int64_t n);

float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* x);
float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* x);
// NVFP4, avx2_nvfp4.cpp: gemv equals vec_dot bit for bit (gemv_invariant: NVFP4 has no tiles).
float vec_dot_nvfp4_q8_0(int64_t n, const void* w, const void* x);
void gemv_nvfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
float vec_dot_q4_k_q8_k(int64_t n, const void* w, const void* x);
float vec_dot_q6_k_q8_k(int64_t n, const void* w, const void* x);

// Register tiles (kernels/traits.h GemmTileFn), avx2_gemm.cpp.
void gemm_q8_0_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y);
void gemm_q4_0_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y);
void gemm_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                     float* const* y);
void gemm_f16(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt, float* const* y);
// K-quant register tiles against Q8_K, bit-identical to vec_dot, avx2_gemm_k.cpp.
void gemm_q4_k_q8_k(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y);
void gemm_q6_k_q8_k(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y);

// Many-token panels (kernels/traits.h GemmPanelFn), avx2_gemm_panel.cpp; equal vec_dot up to f32
// summation order (the AVX-512 panels' arithmetic).
void gemm_panel_q8_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y);
void gemm_panel_q4_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y);
void gemm_panel_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                           float* const* y);

// K-quant many-token panels against Q8_K, bit-identical to vec_dot, avx2_gemm_panel_k.cpp.
void gemm_panel_q4_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y);
void gemm_panel_q6_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y);

// F16 many-token panel, avx2_gemm_panel_f16.cpp: gemv_f16's bits per element (decode and prefill
// agree), equal to vec_dot up to f32 summation order.
void gemm_panel_f16(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                    float* const* y);

// One-token products (kernels/traits.h GemvFn), avx2_gemv.cpp; equal vec_dot per row up to f32
// summation order.
void gemv_q8_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
void gemv_q4_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
void gemv_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
void gemv_f16(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
void gemv_bf16(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
// K-quant one-token products against Q8_K, bit-identical to vec_dot, avx2_gemv_k.cpp.
void gemv_q4_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);
void gemv_q6_k_q8_k(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y);

}  // namespace strata::x86::avx2
