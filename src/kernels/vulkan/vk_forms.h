// Shared by the Vulkan device's ops (vk_ops.cpp, vk_attention.cpp): the device's forms of host
// activations for a weight type's vec_dot_type (linear.comp's x) and their conversion on the
// host, bound ranges of buffers, and the limits every Vulkan device has.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/qtypes.h"

namespace strata::vk {

constexpr uint32_t kMaxGroups = 65535;  // the least maxComputeWorkGroupCount Vulkan allows
constexpr size_t kRegionAlign = 256;    // the largest minStorageBufferOffsetAlignment Vulkan allows
constexpr int64_t kMaxRows = int64_t{kMaxGroups} * kMaxGroups;

inline size_t align_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

// The bound range of `bytes` at `offset` in a buffer: from the 256-byte boundary at or before
// offset, a whole number of words (within the VkBuffer, whose size is rounded up to 16).
struct Window {
  size_t base, span;
};
inline Window window(size_t offset, size_t bytes) {
  const size_t base = offset / kRegionAlign * kRegionAlign;
  return Window{base, align_up(offset - base + bytes, 4)};
}

// swiglu.comp's push constants.
struct SwigluParams {
  uint32_t n_tok, F, form, act;  // act: 0 swiglu, 1 swiglu_oai, 2 swiglu_clamped, 3 g as it is
  float alpha, limit;
};

// attn_rope.comp's and attention.comp's push constants (offsets in S: f32 indices; ~0u: absent;
// kc_off / vc_off, the rows' flags and tables: shaders/kv_rows.glsl).
struct AttnRopeParams {
  uint32_t n_tok, t0, pos0, n_head, n_kv, hdk, hdv, n_rot, neox;
  uint32_t q_off, k_off, v_off, rope_off, qn_off, kn_off, kc_off, vc_off, cap_k, cap_v, flags;
  float eps;
  uint32_t kt_off, vt_off, br_k, br_v;
};
struct AttentionParams {
  uint32_t n_tok, t0, pos0, n_head, n_kv, hdk, hdv, window;
  float scale;
  uint32_t q_off, o_off, sink_off, kc_off, vc_off, cap_k, cap_v, flags, kt_off, vt_off, br_k, br_v;
};
constexpr uint32_t kAttnMaxHeadDim = 256;  // attention.comp's MAX_HD

// The KV row types the attention shaders store (shaders/kv_rows.glsl's KV_* codes; ~0u: none)
// and the unit their offsets count: words (f32), bytes (fp8_e4m3, mxfp4) or 16-bit halves.
inline uint32_t kv_type_code(GgmlType t) {
  switch (t) {
    case GgmlType::f32:
      return 0;
    case GgmlType::f16:
      return 1;
    case GgmlType::q8_0:
      return 2;
    case GgmlType::q4_0:
      return 3;
    case GgmlType::iq4_nl:
      return 4;
    case GgmlType::bf16:
      return 5;
    case GgmlType::fp8_e4m3:
      return 6;
    case GgmlType::mxfp4:
      return 7;
    default:
      return ~0u;
  }
}
inline size_t kv_row_unit(GgmlType t) {
  return t == GgmlType::f32 ? 4 : t == GgmlType::fp8_e4m3 || t == GgmlType::mxfp4 ? 1 : 2;
}

// The device's form of activations for a weight type's vec_dot_type (linear.comp's x):
// xform_q8 (Q8_0, for Q8_0 / Q4_0 / MXFP4): per 32 values 9 words, the scale as f32 then 32 int8;
// xform_q8k (Q8_K, for Q4_K / Q5_K / Q6_K): per 256 values quant/'s BlockQ8_K as it is, 73 words
// (d f32, 256 int8, the 16 sums of 16 as int16); xform_q8_1 (Q8_1, for Q5_1): per 32 values 10
// words, d and s (the fp16 d·Σq) as f32, then 32 int8.
enum XForm : uint32_t {
  xform_f32 = 0,
  xform_f16 = 1,
  xform_q8 = 2,
  xform_bf16 = 3,
  xform_q8k = 4,
  xform_q8_1 = 5
};

XForm form_of(GgmlType t);
size_t form_bytes(XForm f, int64_t n, int64_t in);
// x [n][in] into form f at dst, by the CPU's own converters (as kernels/linear converts).
void to_form(XForm f, const float* x, int64_t n, int64_t in, uint8_t* dst);

}  // namespace strata::vk
