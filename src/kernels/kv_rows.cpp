#include "kernels/kv_rows.h"

#include <cstring>

#include "kernels/traits.h"
#include "quant/quant_ref.h"

namespace strata {

bool kv_rows_read_as_f32(GgmlType t) {
  return t == GgmlType::f32 || t == GgmlType::f16 || t == GgmlType::bf16 || t == GgmlType::fp8_e4m3 ||
         t == GgmlType::mxfp4;
}

// nvfp4 (V4.1's compressed KV) is stored and converted (kv_store / kv_to_f32) but has no KvRowOps:
// attention does not read it in place (V4.1 decodes the rows it attends to).
bool kv_rows_type_ok(GgmlType t) {
  return t == GgmlType::f32 || t == GgmlType::f16 || t == GgmlType::bf16 || t == GgmlType::q8_0 ||
         t == GgmlType::q4_0 || t == GgmlType::iq4_nl || t == GgmlType::fp8_e4m3 || t == GgmlType::mxfp4 ||
         t == GgmlType::nvfp4;
}

void kv_store(const KvRows& r, int64_t i, int64_t c0, const float* x, int64_t n) {
  uint8_t* dst = r.row_ptr(i) + r.col_bytes(c0);
  if (r.type == GgmlType::f32) {
    std::memcpy(dst, x, sizeof(float) * static_cast<size_t>(n));
    return;
  }
  const QuantRef* q = quant_ref(r.type);
  STRATA_ASSERT(q && q->from_float && kv_rows_type_ok(r.type));
  q->from_float(x, dst, n);
}

void kv_to_f32(const KvRows& r, int64_t i, float* out) {
  const uint8_t* src = r.row_ptr(i);
  if (r.type == GgmlType::f32) {
    std::memcpy(out, src, sizeof(float) * static_cast<size_t>(r.width));
    return;
  }
  const KernelTraits& k = kernel_traits(r.type);
  STRATA_ASSERT(k.to_float && kv_rows_type_ok(r.type));
  k.to_float(src, out, r.width);
}

}  // namespace strata
