#include "kernels/vulkan/vk_forms.h"

#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "kernels/traits.h"
#include "quant/q5_ref.h"

namespace strata::vk {

XForm form_of(GgmlType t) {
  if (kernel_traits(t).vec_dot_type == GgmlType::q8_k) return xform_q8k;
  if (kernel_traits(t).vec_dot_type == GgmlType::q8_1) return xform_q8_1;
  return t == GgmlType::f32    ? xform_f32
         : t == GgmlType::f16  ? xform_f16
         : t == GgmlType::bf16 ? xform_bf16
                               : xform_q8;
}

size_t form_bytes(XForm f, int64_t n, int64_t in) {
  if (f == xform_q8k) return static_cast<size_t>(n * (in / QK_K)) * sizeof(BlockQ8_K);
  if (f == xform_q8_1) return static_cast<size_t>(n * (in / 32)) * 40;
  return f == xform_q8 ? static_cast<size_t>(n * (in / 32)) * 36 : static_cast<size_t>(n * in) * 4;
}

void to_form(XForm f, const float* x, int64_t n, int64_t in, uint8_t* dst) {
  if (f == xform_f32) {
    std::memcpy(dst, x, form_bytes(f, n, in));
  } else if (f == xform_f16 || f == xform_bf16) {  // rounded to the half type and back
    const GgmlType ht = f == xform_f16 ? GgmlType::f16 : GgmlType::bf16;
    const KernelTraits& half = kernel_traits(ht);
    std::vector<uint8_t> row(row_bytes(ht, in));
    for (int64_t t = 0; t < n; ++t) {
      half.from_float(x + t * in, row.data(), in);
      half.to_float(row.data(), reinterpret_cast<float*>(dst) + t * in, in);
    }
  } else if (f == xform_q8k) {  // BlockQ8_K is all whole words: its bytes are the device's form
    static_assert(sizeof(BlockQ8_K) == 73 * 4);
    const KernelTraits& q8k = kernel_traits(GgmlType::q8_k);
    for (int64_t t = 0; t < n; ++t) q8k.from_float(x + t * in, dst + form_bytes(f, t, in), in);
  } else if (f == xform_q8_1) {
    const KernelTraits& q8 = kernel_traits(GgmlType::q8_1);
    std::vector<BlockQ8_1> row(static_cast<size_t>(in / 32));
    for (int64_t t = 0; t < n; ++t) {
      q8.from_float(x + t * in, row.data(), in);
      for (const BlockQ8_1& b : row) {
        const float d = fp16_to_f32(b.d), s = fp16_to_f32(b.s);
        std::memcpy(dst, &d, 4);
        std::memcpy(dst + 4, &s, 4);
        std::memcpy(dst + 8, b.qs, 32);
        dst += 40;
      }
    }
  } else {
    const KernelTraits& q8 = kernel_traits(GgmlType::q8_0);
    std::vector<BlockQ8_0> row(static_cast<size_t>(in / 32));
    for (int64_t t = 0; t < n; ++t) {
      q8.from_float(x + t * in, row.data(), in);
      for (const BlockQ8_0& b : row) {
        const float d = fp16_to_f32(b.d);
        std::memcpy(dst, &d, 4);
        std::memcpy(dst + 4, b.qs, 32);
        dst += 36;
      }
    }
  }
}

}  // namespace strata::vk
