#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/isa_kernels.h"

namespace strata::x86 {

void fill_avx2(KernelTraits* t) {
  auto at = [t](GgmlType ty) -> KernelTraits& { return t[static_cast<size_t>(ty)]; };
  at(GgmlType::f32).vec_dot = avx2::vec_dot_f32;
  at(GgmlType::f16).vec_dot = avx2::vec_dot_f16;
  at(GgmlType::f16).to_float = avx2::to_float_f16;
  at(GgmlType::f16).from_float = avx2::from_float_f16;
  at(GgmlType::bf16).vec_dot = avx2::vec_dot_bf16;
  at(GgmlType::bf16).to_float = avx2::to_float_bf16;
  at(GgmlType::bf16).from_float = avx2::from_float_bf16;
  at(GgmlType::fp8_e4m3).to_float = avx2::to_float_fp8_e4m3;
  at(GgmlType::mxfp4).to_float = avx2::to_float_mxfp4;
  at(GgmlType::q8_0).from_float = avx2::from_float_q8_0;
  at(GgmlType::q8_0).vec_dot = avx2::vec_dot_q8_0_q8_0;
  at(GgmlType::q4_0).vec_dot = avx2::vec_dot_q4_0_q8_0;
  at(GgmlType::mxfp4).vec_dot = avx2::vec_dot_mxfp4_q8_0;
  at(GgmlType::nvfp4).vec_dot = avx2::vec_dot_nvfp4_q8_0;
  at(GgmlType::nvfp4).gemv = avx2::gemv_nvfp4_q8_0;
  at(GgmlType::q8_k).from_float = avx2::from_float_q8_k;
  at(GgmlType::q4_k).vec_dot = avx2::vec_dot_q4_k_q8_k;
  at(GgmlType::q6_k).vec_dot = avx2::vec_dot_q6_k_q8_k;
  at(GgmlType::q8_0).gemm = avx2::gemm_q8_0_q8_0;
  at(GgmlType::q4_0).gemm = avx2::gemm_q4_0_q8_0;
  at(GgmlType::mxfp4).gemm = avx2::gemm_mxfp4_q8_0;
  at(GgmlType::f16).gemm = avx2::gemm_f16;
  at(GgmlType::q4_k).gemm = avx2::gemm_q4_k_q8_k;
  at(GgmlType::q6_k).gemm = avx2::gemm_q6_k_q8_k;
  at(GgmlType::q8_0).gemm_panel = avx2::gemm_panel_q8_0_q8_0;
  at(GgmlType::q4_0).gemm_panel = avx2::gemm_panel_q4_0_q8_0;
  at(GgmlType::mxfp4).gemm_panel = avx2::gemm_panel_mxfp4_q8_0;
  at(GgmlType::q4_k).gemm_panel = avx2::gemm_panel_q4_k_q8_k;
  at(GgmlType::q6_k).gemm_panel = avx2::gemm_panel_q6_k_q8_k;
  at(GgmlType::f16).gemm_panel = avx2::gemm_panel_f16;
  at(GgmlType::q8_0).gemv = avx2::gemv_q8_0_q8_0;
  at(GgmlType::q4_0).gemv = avx2::gemv_q4_0_q8_0;
  at(GgmlType::mxfp4).gemv = avx2::gemv_mxfp4_q8_0;
  at(GgmlType::f16).gemv = avx2::gemv_f16;
  at(GgmlType::bf16).gemv = avx2::gemv_bf16;
  at(GgmlType::q4_k).gemv = avx2::gemv_q4_k_q8_k;
  at(GgmlType::q6_k).gemv = avx2::gemv_q6_k_q8_k;
  // The gemvs with the bits of the many-token path: the 32-element block types (per block the exact
  // integer dot, then fma with dw·dx, as the panel), F16 (the panel's 1024-element chunks) and the
  // K-quants (whose panels hand few tokens to the tiles, which share the gemv's block order), NVFP4
  // (vec_dot's bits; its many tokens run vec_dot).
  at(GgmlType::q8_0).gemv_invariant = true;
  at(GgmlType::q4_0).gemv_invariant = true;
  at(GgmlType::mxfp4).gemv_invariant = true;
  at(GgmlType::nvfp4).gemv_invariant = true;  // its vec_dot's bits, and it has no tiles or panel
  at(GgmlType::f16).gemv_invariant = true;
  at(GgmlType::q4_k).gemv_invariant = true;
  at(GgmlType::q6_k).gemv_invariant = true;
}

}  // namespace strata::x86
