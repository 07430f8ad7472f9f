#include "kernels/vulkan/vk_shaders.h"

namespace strata::vk {

namespace {
// The .inc files are glslc -mfmt=num output (comma-separated words), generated under the build
// folder by src/CMakeLists.txt.
constexpr uint32_t kLinearF32[] = {
#include "linear_f32.spv.inc"
};
constexpr uint32_t kLinearF16[] = {
#include "linear_f16.spv.inc"
};
constexpr uint32_t kLinearBF16[] = {
#include "linear_bf16.spv.inc"
};
constexpr uint32_t kLinearMxfp4[] = {
#include "linear_mxfp4.spv.inc"
};
constexpr uint32_t kLinearQ8_0[] = {
#include "linear_q8_0.spv.inc"
};
constexpr uint32_t kLinearQ4_0[] = {
#include "linear_q4_0.spv.inc"
};
constexpr uint32_t kSwiglu[] = {
#include "swiglu.spv.inc"
};
constexpr uint32_t kAttnRope[] = {
#include "attn_rope.spv.inc"
};
constexpr uint32_t kAttention[] = {
#include "attention.spv.inc"
};
constexpr uint32_t kSparseAttention[] = {
#include "sparse_attention.spv.inc"
};
}  // namespace

std::span<const uint32_t> swiglu_shader() {
  return kSwiglu;
}

std::span<const uint32_t> attn_rope_shader() {
  return kAttnRope;
}

std::span<const uint32_t> attention_shader() {
  return kAttention;
}

std::span<const uint32_t> sparse_attention_shader() {
  return kSparseAttention;
}

std::span<const uint32_t> linear_shader(GgmlType t) {
  switch (t) {
    case GgmlType::f32:
      return kLinearF32;
    case GgmlType::f16:
      return kLinearF16;
    case GgmlType::q8_0:
      return kLinearQ8_0;
    case GgmlType::bf16:
      return kLinearBF16;
    case GgmlType::mxfp4:
      return kLinearMxfp4;
    case GgmlType::q4_0:
      return kLinearQ4_0;
    default:
      return {};
  }
}

}  // namespace strata::vk
