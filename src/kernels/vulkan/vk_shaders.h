// The compute shaders (kernels/vulkan/shaders/*.comp), compiled by glslc at build time into
// SPIR-V words that are part of the binary.
#pragma once

#include <cstdint>
#include <span>

#include "quant/qtypes.h"

namespace strata::vk {

// linear.comp built for weight type t (empty for a type it has no build for): jobs, its job-list
// build (-DJOBS: many products of one shape in one dispatch); subgroup, its build with a row
// per subgroup (-DSUBGROUP: 128 invocations, subgroupAdd) instead of a row per 64-invocation
// workgroup and a shared-memory tree.
std::span<const uint32_t> linear_shader(GgmlType t, bool jobs, bool subgroup);
// swiglu.comp: h = silu(g) ⊙ u into the form of down's vec_dot_type.
std::span<const uint32_t> swiglu_shader();
// attn_rope.comp: q / k norms, RoPE, K / V rows into the caches (one segment).
std::span<const uint32_t> attn_rope_shader();
// attention.comp: softmax(q·k)·v with sinks over a segment's causal / window keys.
std::span<const uint32_t> attention_shader();
// sparse_attention.comp: DeepSeek-V4's attention core over window and compressed rows.
std::span<const uint32_t> sparse_attention_shader();

}  // namespace strata::vk
