// The scalar reference of attention's per-key products over typed KV rows (kernels/ops.h
// KvRowOps, which states the numerics): f16 / bf16 rows converted to f32 by quant/'s to_float,
// then the f32 row products; block types by the query quantized to Q8_0 and quant/'s vec_dot,
// and an fma per value with the block's scale times the key's weight. Also the Walsh-Hadamard
// rotation of quantized KV rows.
#include <cmath>
#include <cstring>

#include "base/assert.h"
#include "base/fp16.h"
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

// Block types: the query as Q8_0 blocks, then ggml's vec_dot per row.
template <GgmlType T>
void dot_rows_block_ref(const float* q, const void* const* k, int64_t nk, int64_t n, float* out) {
  STRATA_ASSERT(n <= kKvRowMaxWidth && n % QK8_0 == 0);
  BlockQ8_0 qq[kKvRowMaxWidth / QK8_0];
  from_float_q8_0(q, qq, n);
  for (int64_t j = 0; j < nk; ++j) out[j] = quant_ref(T)->vec_dot(n, k[j], qq);
}

// The 32 values of a block of a block type as integers (Q8_0's, Q4_0's nibble − 8, IQ4_NL's
// grid values); the block's scale d is its first two bytes.
template <GgmlType T>
void block_ints(const uint8_t* b, int8_t* v) {
  const uint8_t* qs = b + 2;
  if constexpr (T == GgmlType::q8_0) {
    std::memcpy(v, qs, QK8_0);
  } else {
    for (int i = 0; i < QK4_0 / 2; ++i) {
      const int lo = qs[i] & 0x0f, hi = qs[i] >> 4;
      v[i] = static_cast<int8_t>(T == GgmlType::q4_0 ? lo - 8 : kIq4NlValues[lo]);
      v[i + QK4_0 / 2] = static_cast<int8_t>(T == GgmlType::q4_0 ? hi - 8 : kIq4NlValues[hi]);
    }
  }
}

template <GgmlType T>
void add_scaled_rows_block_ref(float* y, const void* const* x, const float* s, int64_t nk, int64_t n) {
  const size_t bb = row_bytes(T, QK8_0);
  for (int64_t j = 0; j < nk; ++j) {
    const uint8_t* r = static_cast<const uint8_t*>(x[j]);
    for (int64_t b = 0; b < n / QK8_0; ++b) {
      const uint8_t* blk = r + static_cast<size_t>(b) * bb;
      uint16_t d;
      std::memcpy(&d, blk, 2);
      const float c = s[j] * fp16_to_f32(d);
      int8_t v[QK8_0];
      block_ints<T>(blk, v);
      float* yb = y + b * QK8_0;
      for (int i = 0; i < QK8_0; ++i) yb[i] = std::fma(c, static_cast<float>(v[i]), yb[i]);
    }
  }
}

template <GgmlType T>
KvRowOps ref_ops() {
  // f16 / bf16, and the FP8 / FP4 rows (exact in f32, read as f32: no query rounding)
  if constexpr (T == GgmlType::f16 || T == GgmlType::bf16 || T == GgmlType::fp8_e4m3 || T == GgmlType::mxfp4)
    return KvRowOps{dot_rows_ref<T>, add_scaled_rows_ref<T>};
  else
    return KvRowOps{dot_rows_block_ref<T>, add_scaled_rows_block_ref<T>};
}

}  // namespace

void fill_kv_row_ops_ref(OpsTable* t) {
  t->kv_f16 = ref_ops<GgmlType::f16>();
  t->kv_bf16 = ref_ops<GgmlType::bf16>();
  t->kv_q8_0 = ref_ops<GgmlType::q8_0>();
  t->kv_q4_0 = ref_ops<GgmlType::q4_0>();
  t->kv_iq4_nl = ref_ops<GgmlType::iq4_nl>();
  t->kv_fp8 = ref_ops<GgmlType::fp8_e4m3>();
  t->kv_mxfp4 = ref_ops<GgmlType::mxfp4>();
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
    case GgmlType::iq4_nl:
      return kv_iq4_nl;
    case GgmlType::fp8_e4m3:
      return kv_fp8;
    case GgmlType::mxfp4:
      return kv_mxfp4;
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
