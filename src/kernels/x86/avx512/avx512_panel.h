// AVX-512 many-token (prefill) products, KernelTraits::gemm_panel: avx512_gemm_panel.cpp
// (32-element block weights against Q8_0) and avx512_gemm_panel_f16.cpp. Compiled with the
// AVX-512 flags; fill_avx512_panel() only stores pointers and may run on any CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/traits.h"

namespace strata::x86 {

void fill_avx512_panel(KernelTraits* table);

namespace avx512 {

void gemm_panel_q8_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y);
void gemm_panel_q4_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                          float* const* y);
void gemm_panel_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                           float* const* y);
void gemm_panel_f16(int64_t n, const void* w, size_t ws, int64_t nr, const void* const* x, int nt,
                    float* const* y);

}  // namespace avx512
}  // namespace strata::x86
