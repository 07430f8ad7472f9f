#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/isa_kernels.h"

namespace strata::x86 {

void fill_avx512(KernelTraits* t) {
  auto at = [t](GgmlType ty) -> KernelTraits& { return t[static_cast<size_t>(ty)]; };
  at(GgmlType::f32).vec_dot = avx512::vec_dot_f32;
  at(GgmlType::f16).vec_dot = avx512::vec_dot_f16;
  at(GgmlType::f16).to_float = avx512::to_float_f16;
  at(GgmlType::f16).from_float = avx512::from_float_f16;
  at(GgmlType::bf16).vec_dot = avx512::vec_dot_bf16;
  at(GgmlType::bf16).to_float = avx512::to_float_bf16;
  at(GgmlType::bf16).from_float = avx512::from_float_bf16;
  at(GgmlType::fp8_e4m3).to_float = avx512::to_float_fp8_e4m3;
  at(GgmlType::mxfp4).to_float = avx512::to_float_mxfp4;
  at(GgmlType::q8_0).from_float = avx512::from_float_q8_0;
  at(GgmlType::q8_0).vec_dot = avx512::vec_dot_q8_0_q8_0;
  at(GgmlType::q4_0).vec_dot = avx512::vec_dot_q4_0_q8_0;
  at(GgmlType::mxfp4).vec_dot = avx512::vec_dot_mxfp4_q8_0;
  at(GgmlType::nvfp4).vec_dot = avx512::vec_dot_nvfp4_q8_0;
  at(GgmlType::nvfp4).gemv = avx512::gemv_nvfp4_q8_0;
  at(GgmlType::q8_k).from_float = avx512::from_float_q8_k;
  at(GgmlType::q4_k).vec_dot = avx512::vec_dot_q4_k_q8_k;
  at(GgmlType::q6_k).vec_dot = avx512::vec_dot_q6_k_q8_k;
  at(GgmlType::q8_0).gemm = avx512::gemm_q8_0_q8_0;
  at(GgmlType::q4_0).gemm = avx512::gemm_q4_0_q8_0;
  at(GgmlType::mxfp4).gemm = avx512::gemm_mxfp4_q8_0;
  at(GgmlType::f16).gemm = avx512::gemm_f16;
  at(GgmlType::bf16).gemm = avx512::gemm_bf16;
  at(GgmlType::q8_0).gemv = avx512::gemv_q8_0_q8_0;
  at(GgmlType::q4_0).gemv = avx512::gemv_q4_0_q8_0;
  at(GgmlType::mxfp4).gemv = avx512::gemv_mxfp4_q8_0;
  at(GgmlType::f16).gemv = avx512::gemv_f16;
  at(GgmlType::bf16).gemv = avx512::gemv_bf16;
  at(GgmlType::q4_k).gemm = avx512::gemm_q4_k_q8_k;
  at(GgmlType::q6_k).gemm = avx512::gemm_q6_k_q8_k;
  at(GgmlType::q4_k).gemv = avx512::gemv_q4_k_q8_k;
  at(GgmlType::q6_k).gemv = avx512::gemv_q6_k_q8_k;
  at(GgmlType::q4_k).gemm_panel = avx512::gemm_panel_q4_k_q8_k;
  at(GgmlType::q6_k).gemm_panel = avx512::gemm_panel_q6_k_q8_k;
  // The table starts from AVX2's: no AVX2 gemv's claim holds for the AVX-512 gemvs set above.
  // The gemvs with the bits of the many-token path (tests/kernels batch_invariance_test): the
  // 32-element block types (lanes = rows, per block the exact integer dot, then fma with dw·dx, as
  // the panel), F16 (the panel's 1024-element chunks), BF16 (the tiles' VDPBF16PS chain per row)
  // the K-quants (bit-identical to vec_dot, as their panels and tiles) and NVFP4 (vec_dot's bits;
  // its many tokens run vec_dot).
  for (size_t i = 0; i < static_cast<size_t>(GgmlType::count); ++i) t[i].gemv_invariant = false;
  for (GgmlType ty : {GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4, GgmlType::f16, GgmlType::bf16,
                      GgmlType::q4_k, GgmlType::q6_k, GgmlType::nvfp4})
    at(ty).gemv_invariant = true;
}

}  // namespace strata::x86
