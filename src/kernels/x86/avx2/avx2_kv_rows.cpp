// AVX2 attention products over f16 / bf16 KV rows (kernels/ops.h KvRowOps), read in place: each
// 8 values are converted in registers (F16C, a bf16 shift: exactly quant/'s to_float) and then
// take dot_f32_rows' / vec_add_scaled_rows' lanes and roundings, so the results are bit-identical
// to the scalar reference. fp8_e4m3 / mxfp4 rows are converted a few at a time and take the f32
// row products. Block types: avx2_kv_quant.cpp. -ffp-contract=off.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "base/fp16.h"
#include "kernels/ops.h"
#include "kernels/x86/avx2/avx2_kernels.h"

namespace strata::x86::avx2 {
namespace {

inline uint16_t u16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

struct F16 {
  static __m256 load8(const uint8_t* r, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2 * i)));
  }
  static float at(const uint8_t* r, int64_t i) { return fp16_to_f32(u16_at(r + 2 * i)); }
};

struct BF16 {
  static __m256 load8(const uint8_t* r, int64_t i) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static float at(const uint8_t* r, int64_t i) { return bf16_to_f32(u16_at(r + 2 * i)); }
};

// Four keys at a time (the last group padded with repeats of the last key): each key's 8 lanes
// as in dot_f32, then the four double reductions side by side in the reference's lane order.
template <class L>
void dot_rows(const float* q, const void* const* k, int64_t nk, int64_t n, float* out) {
  const int64_t n8 = n / 8 * 8;
  for (int64_t j = 0; j < nk; j += 4) {
    const uint8_t* r[4];
    for (int c = 0; c < 4; ++c) r[c] = static_cast<const uint8_t*>(k[std::min(j + c, nk - 1)]);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n8; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      a0 = _mm256_add_ps(a0, _mm256_mul_ps(qv, L::load8(r[0], i)));
      a1 = _mm256_add_ps(a1, _mm256_mul_ps(qv, L::load8(r[1], i)));
      a2 = _mm256_add_ps(a2, _mm256_mul_ps(qv, L::load8(r[2], i)));
      a3 = _mm256_add_ps(a3, _mm256_mul_ps(qv, L::load8(r[3], i)));
    }
    // 4×8 transpose: u[c] holds lanes c (low half) and c + 4 (high half) of keys 0..3.
    const __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1);
    const __m256 t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3);
    const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xee),
                         _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xee)};
    __m256d sum = _mm256_setzero_pd();
    for (int c = 0; c < 4; ++c) sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_castps256_ps128(u[c])));
    for (int c = 0; c < 4; ++c) sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_extractf128_ps(u[c], 1)));
    alignas(32) double d[4];
    _mm256_store_pd(d, sum);
    for (int64_t i = n8; i < n; ++i)
      for (int c = 0; c < 4; ++c) d[c] += static_cast<double>(q[i] * L::at(r[c], i));
    for (int c = 0; c < 4 && j + c < nk; ++c) out[j + c] = static_cast<float>(d[c]);
  }
}

// 32 outputs stay in registers across all keys; each key adds s·x with two roundings, in key
// order, as vec_add_scaled_rows does over the converted rows.
template <class L>
void add_scaled_rows(float* y, const void* const* x, const float* s, int64_t nk, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
    __m256 y2 = _mm256_loadu_ps(y + i + 16), y3 = _mm256_loadu_ps(y + i + 24);
    for (int64_t j = 0; j < nk; ++j) {
      const __m256 sv = _mm256_set1_ps(s[j]);
      const uint8_t* r = static_cast<const uint8_t*>(x[j]);
      y0 = _mm256_add_ps(y0, _mm256_mul_ps(sv, L::load8(r, i)));
      y1 = _mm256_add_ps(y1, _mm256_mul_ps(sv, L::load8(r, i + 8)));
      y2 = _mm256_add_ps(y2, _mm256_mul_ps(sv, L::load8(r, i + 16)));
      y3 = _mm256_add_ps(y3, _mm256_mul_ps(sv, L::load8(r, i + 24)));
    }
    _mm256_storeu_ps(y + i, y0);
    _mm256_storeu_ps(y + i + 8, y1);
    _mm256_storeu_ps(y + i + 16, y2);
    _mm256_storeu_ps(y + i + 24, y3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 y0 = _mm256_loadu_ps(y + i);
    for (int64_t j = 0; j < nk; ++j)
      y0 = _mm256_add_ps(y0,
                         _mm256_mul_ps(_mm256_set1_ps(s[j]), L::load8(static_cast<const uint8_t*>(x[j]), i)));
    _mm256_storeu_ps(y + i, y0);
  }
  for (; i < n; ++i)
    for (int64_t j = 0; j < nk; ++j) y[i] += s[j] * L::at(static_cast<const uint8_t*>(x[j]), i);
}

template <class L>
KvRowOps ops() {
  return KvRowOps{dot_rows<L>, add_scaled_rows<L>};
}

// fp8_e4m3 / mxfp4 rows, four at a time: converted to f32 (avx2_kv_float.cpp, quant/'s bits), then
// dot_f32_rows / vec_add_scaled_rows over them, the reference's products in its key order.
using ToF32 = void (*)(const void*, float*, int64_t);

template <ToF32 Conv>
void dot_rows_converted(const float* q, const void* const* k, int64_t nk, int64_t n, float* out) {
  alignas(32) float rows[4][kKvRowMaxWidth];
  const float* p[4] = {rows[0], rows[1], rows[2], rows[3]};
  const OpsTable& f32 = ops_table(Isa::avx2);
  for (int64_t j = 0; j < nk; j += 4) {
    const int64_t m = std::min<int64_t>(4, nk - j);
    for (int64_t c = 0; c < m; ++c) Conv(k[j + c], rows[c], n);
    f32.dot_f32_rows(q, p, m, n, out + j);
  }
}

template <ToF32 Conv>
void add_scaled_rows_converted(float* y, const void* const* x, const float* s, int64_t nk, int64_t n) {
  alignas(32) float rows[4][kKvRowMaxWidth];
  const float* p[4] = {rows[0], rows[1], rows[2], rows[3]};
  const OpsTable& f32 = ops_table(Isa::avx2);
  for (int64_t j = 0; j < nk; j += 4) {
    const int64_t m = std::min<int64_t>(4, nk - j);
    for (int64_t c = 0; c < m; ++c) Conv(x[j + c], rows[c], n);
    f32.vec_add_scaled_rows(y, p, s + j, m, n);
  }
}

}  // namespace

void fill_kv_row_ops(OpsTable* t) {
  t->kv_f16 = ops<F16>();
  t->kv_bf16 = ops<BF16>();
  t->kv_fp8 = {dot_rows_converted<to_float_fp8_e4m3>, add_scaled_rows_converted<to_float_fp8_e4m3>};
  t->kv_mxfp4 = {dot_rows_converted<to_float_mxfp4>, add_scaled_rows_converted<to_float_mxfp4>};
  fill_kv_quant_ops(t);
}

}  // namespace strata::x86::avx2
