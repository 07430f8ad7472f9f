// The scalar reference of attention's per-key products over typed KV rows (kernels/ops.h
// KvRowOps): each row converted to f32 by quant/'s to_float, then the f32 row products. Also the
// Walsh-Hadamard rotation of quantized KV rows.
#include <cmath>

#include "base/assert.h"
#include "kernels/ops.h"
#include "quant/quant_ref.h"

namespace strata {

namespace {

template <GgmlType T>
void dot_rows_ref(const float* q, const void* const* k, int64_t nk, int64_t n, float* out) {
  STRATA_ASSERT(n <= kKvRowMaxWidth);
  const OpsTable& f32 = ops_table(Isa::scalar);
  float row[kKvRowMaxWidth];
  for (int64_t j = 0; j < nk; ++j) {
    quant_ref(T)->to_float(k[j], row, n);
    out[j] = f32.dot_f32(q, row, n);
  }
}

template <GgmlType T>
void add_scaled_rows_ref(float* y, const void* const* x, const float* s, int64_t nk, int64_t n) {
  STRATA_ASSERT(n <= kKvRowMaxWidth);
  const OpsTable& f32 = ops_table(Isa::scalar);
  float row[kKvRowMaxWidth];
  for (int64_t j = 0; j < nk; ++j) {
    quant_ref(T)->to_float(x[j], row, n);
    f32.vec_add_scaled(y, row, s[j], n);
  }
}

template <GgmlType T>
KvRowOps ref_ops() {
  return KvRowOps{dot_rows_ref<T>, add_scaled_rows_ref<T>};
}

}  // namespace

void fill_kv_row_ops_ref(OpsTable* t) {
  t->kv_f16 = ref_ops<GgmlType::f16>();
  t->kv_bf16 = ref_ops<GgmlType::bf16>();
  t->kv_q8_0 = ref_ops<GgmlType::q8_0>();
  t->kv_q4_0 = ref_ops<GgmlType::q4_0>();
}

const KvRowOps& OpsTable::kv_rows(GgmlType t) const {
  switch (t) {
    case GgmlType::f16:
      return kv_f16;
    case GgmlType::bf16:
      return kv_bf16;
    case GgmlType::q8_0:
      return kv_q8_0;
    case GgmlType::q4_0:
      return kv_q4_0;
    default:
      STRATA_ASSERT_MSG(false, "no KV row kernels for this type");
  }
  return kv_f16;
}

int64_t hadamard_block(int64_t n) {
  int64_t b = 1;
  while (b < 256 && n % (2 * b) == 0) b *= 2;
  return b;
}

void hadamard_rotate(float* x, int64_t n) {
  const int64_t b = hadamard_block(n);
  if (b == 1) return;
  const float norm = 1.0f / std::sqrt(static_cast<float>(b));
  for (int64_t o = 0; o < n; o += b) {
    float* v = x + o;
    for (int64_t h = 1; h < b; h *= 2)
      for (int64_t i = 0; i < b; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          const float a = v[j], c = v[j + h];
          v[j] = a + c;
          v[j + h] = a - c;
        }
    for (int64_t i = 0; i < b; ++i) v[i] *= norm;
  }
}

}  // namespace strata
