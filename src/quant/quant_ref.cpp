#include "quant/quant_ref.h"

#include "quant/q5_ref.h"

namespace strata {

const QuantRef* quant_ref(GgmlType t) {
  static const QuantRef kTable[] = {
      {GgmlType::f32, GgmlType::f32, to_float_f32, from_float_f32, vec_dot_f32},
      {GgmlType::f16, GgmlType::f16, to_float_f16, from_float_f16, vec_dot_f16},
      {GgmlType::bf16, GgmlType::bf16, to_float_bf16, from_float_bf16, vec_dot_bf16},
      {GgmlType::q8_0, GgmlType::q8_0, to_float_q8_0, from_float_q8_0, vec_dot_q8_0_q8_0},
      {GgmlType::q4_0, GgmlType::q8_0, to_float_q4_0, from_float_q4_0, vec_dot_q4_0_q8_0},
      {GgmlType::q5_0, GgmlType::q8_0, to_float_q5_0, from_float_q5_0, vec_dot_q5_0_q8_0},
      {GgmlType::q5_1, GgmlType::q8_1, to_float_q5_1, from_float_q5_1, vec_dot_q5_1_q8_1},
      {GgmlType::q8_1, GgmlType::q8_1, to_float_q8_1, from_float_q8_1, nullptr},
      {GgmlType::iq4_nl, GgmlType::q8_0, to_float_iq4_nl, from_float_iq4_nl, vec_dot_iq4_nl_q8_0},
      {GgmlType::mxfp4, GgmlType::q8_0, to_float_mxfp4, from_float_mxfp4, vec_dot_mxfp4_q8_0},
      {GgmlType::fp8_e4m3, GgmlType::f32, to_float_fp8_e4m3, from_float_fp8_e4m3, nullptr},
      {GgmlType::nvfp4, GgmlType::q8_0, to_float_nvfp4, from_float_nvfp4, vec_dot_nvfp4_q8_0},
      {GgmlType::q8_k, GgmlType::q8_k, to_float_q8_k, from_float_q8_k, nullptr},
      {GgmlType::q4_k, GgmlType::q8_k, to_float_q4_k, from_float_q4_k, vec_dot_q4_k_q8_k},
      {GgmlType::q5_k, GgmlType::q8_k, to_float_q5_k, from_float_q5_k, vec_dot_q5_k_q8_k},
      {GgmlType::q6_k, GgmlType::q8_k, to_float_q6_k, from_float_q6_k, vec_dot_q6_k_q8_k},
  };
  for (const QuantRef& r : kTable) {
    if (r.type == t) return &r;
  }
  return nullptr;
}

}  // namespace strata
