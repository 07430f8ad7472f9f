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
constexpr uint32_t kLinearJobsF32[] = {
#include "linear_jobs_f32.spv.inc"
};
constexpr uint32_t kLinearJobsF16[] = {
#include "linear_jobs_f16.spv.inc"
};
constexpr uint32_t kLinearJobsBF16[] = {
#include "linear_jobs_bf16.spv.inc"
};
constexpr uint32_t kLinearJobsMxfp4[] = {
#include "linear_jobs_mxfp4.spv.inc"
};
constexpr uint32_t kLinearJobsQ8_0[] = {
#include "linear_jobs_q8_0.spv.inc"
};
constexpr uint32_t kLinearJobsQ4_0[] = {
#include "linear_jobs_q4_0.spv.inc"
};
constexpr uint32_t kLinearSgF32[] = {
#include "linear_sg_f32.spv.inc"
};
constexpr uint32_t kLinearJobsSgF32[] = {
#include "linear_jobs_sg_f32.spv.inc"
};
constexpr uint32_t kLinearSgF16[] = {
#include "linear_sg_f16.spv.inc"
};
constexpr uint32_t kLinearJobsSgF16[] = {
#include "linear_jobs_sg_f16.spv.inc"
};
constexpr uint32_t kLinearSgBF16[] = {
#include "linear_sg_bf16.spv.inc"
};
constexpr uint32_t kLinearJobsSgBF16[] = {
#include "linear_jobs_sg_bf16.spv.inc"
};
constexpr uint32_t kLinearSgMxfp4[] = {
#include "linear_sg_mxfp4.spv.inc"
};
constexpr uint32_t kLinearJobsSgMxfp4[] = {
#include "linear_jobs_sg_mxfp4.spv.inc"
};
constexpr uint32_t kLinearSgQ8_0[] = {
#include "linear_sg_q8_0.spv.inc"
};
constexpr uint32_t kLinearJobsSgQ8_0[] = {
#include "linear_jobs_sg_q8_0.spv.inc"
};
constexpr uint32_t kLinearSgQ4_0[] = {
#include "linear_sg_q4_0.spv.inc"
};
constexpr uint32_t kLinearJobsSgQ4_0[] = {
#include "linear_jobs_sg_q4_0.spv.inc"
};
constexpr uint32_t kLinearQ4_K[] = {
#include "linear_q4_k.spv.inc"
};
constexpr uint32_t kLinearJobsQ4_K[] = {
#include "linear_jobs_q4_k.spv.inc"
};
constexpr uint32_t kLinearSgQ4_K[] = {
#include "linear_sg_q4_k.spv.inc"
};
constexpr uint32_t kLinearJobsSgQ4_K[] = {
#include "linear_jobs_sg_q4_k.spv.inc"
};
constexpr uint32_t kLinearQ5_K[] = {
#include "linear_q5_k.spv.inc"
};
constexpr uint32_t kLinearJobsQ5_K[] = {
#include "linear_jobs_q5_k.spv.inc"
};
constexpr uint32_t kLinearSgQ5_K[] = {
#include "linear_sg_q5_k.spv.inc"
};
constexpr uint32_t kLinearJobsSgQ5_K[] = {
#include "linear_jobs_sg_q5_k.spv.inc"
};
constexpr uint32_t kLinearQ6_K[] = {
#include "linear_q6_k.spv.inc"
};
constexpr uint32_t kLinearJobsQ6_K[] = {
#include "linear_jobs_q6_k.spv.inc"
};
constexpr uint32_t kLinearSgQ6_K[] = {
#include "linear_sg_q6_k.spv.inc"
};
constexpr uint32_t kLinearJobsSgQ6_K[] = {
#include "linear_jobs_sg_q6_k.spv.inc"
};
constexpr uint32_t kLinearQ5_0[] = {
#include "linear_q5_0.spv.inc"
};
constexpr uint32_t kLinearJobsQ5_0[] = {
#include "linear_jobs_q5_0.spv.inc"
};
constexpr uint32_t kLinearSgQ5_0[] = {
#include "linear_sg_q5_0.spv.inc"
};
constexpr uint32_t kLinearJobsSgQ5_0[] = {
#include "linear_jobs_sg_q5_0.spv.inc"
};
constexpr uint32_t kLinearNvfp4[] = {
#include "linear_nvfp4.spv.inc"
};
constexpr uint32_t kLinearJobsNvfp4[] = {
#include "linear_jobs_nvfp4.spv.inc"
};
constexpr uint32_t kLinearSgNvfp4[] = {
#include "linear_sg_nvfp4.spv.inc"
};
constexpr uint32_t kLinearJobsSgNvfp4[] = {
#include "linear_jobs_sg_nvfp4.spv.inc"
};
constexpr uint32_t kLinearQ5_1[] = {
#include "linear_q5_1.spv.inc"
};
constexpr uint32_t kLinearJobsQ5_1[] = {
#include "linear_jobs_q5_1.spv.inc"
};
constexpr uint32_t kLinearSgQ5_1[] = {
#include "linear_sg_q5_1.spv.inc"
};
constexpr uint32_t kLinearJobsSgQ5_1[] = {
#include "linear_jobs_sg_q5_1.spv.inc"
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

std::span<const uint32_t> linear_shader(GgmlType t, bool jobs, bool subgroup) {
  // [type][jobs][subgroup]
#define STRATA_LINEAR_CASE(T, N)                                                            \
  case GgmlType::T:                                                                         \
    return jobs ? (subgroup ? std::span<const uint32_t>(kLinearJobsSg##N) : kLinearJobs##N) \
                : (subgroup ? std::span<const uint32_t>(kLinearSg##N) : kLinear##N);
  switch (t) {
    STRATA_LINEAR_CASE(f32, F32)
    STRATA_LINEAR_CASE(f16, F16)
    STRATA_LINEAR_CASE(bf16, BF16)
    STRATA_LINEAR_CASE(q8_0, Q8_0)
    STRATA_LINEAR_CASE(q4_0, Q4_0)
    STRATA_LINEAR_CASE(q5_0, Q5_0)
    STRATA_LINEAR_CASE(q5_1, Q5_1)
    STRATA_LINEAR_CASE(mxfp4, Mxfp4)
    STRATA_LINEAR_CASE(nvfp4, Nvfp4)
    STRATA_LINEAR_CASE(q4_k, Q4_K)
    STRATA_LINEAR_CASE(q5_k, Q5_K)
    STRATA_LINEAR_CASE(q6_k, Q6_K)
    default:
      return {};
  }
#undef STRATA_LINEAR_CASE
}

}  // namespace strata::vk
