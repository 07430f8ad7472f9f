// AVX-512 Σ s·v over f16 / bf16 KV rows (kernels/ops.h KvRowOps::add_scaled_rows): 16 values
// converted in registers as quant/'s to_float does, then vec_add_scaled_rows' two roundings per
// key in key order (bit-identical to the scalar reference). q·k keeps the AVX2 kernels (the
// reference's 8-lane order). Block types: avx512_kv_quant.cpp. -ffp-contract=off.
// GCC 12's AVX-512 conversion intrinsics (the 256 → 512 widenings) trip maybe-uninitialized once
// inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "base/fp16.h"
#include "kernels/ops.h"
#include "kernels/x86/avx512/avx512_kernels.h"

namespace strata::x86::avx512 {
namespace {

inline uint16_t u16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

struct F16 {
  static __m512 load16(const uint8_t* r, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 2 * i)));
  }
  static float at(const uint8_t* r, int64_t i) { return fp16_to_f32(u16_at(r + 2 * i)); }
};

struct BF16 {
  static __m512 load16(const uint8_t* r, int64_t i) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 2 * i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static float at(const uint8_t* r, int64_t i) { return bf16_to_f32(u16_at(r + 2 * i)); }
};

template <class L>
void add_scaled_rows(float* y, const void* const* x, const float* s, int64_t nk, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);
    for (int64_t j = 0; j < nk; ++j) {
      const __m512 sv = _mm512_set1_ps(s[j]);
      const uint8_t* r = static_cast<const uint8_t*>(x[j]);
      y0 = _mm512_add_ps(y0, _mm512_mul_ps(sv, L::load16(r, i)));
      y1 = _mm512_add_ps(y1, _mm512_mul_ps(sv, L::load16(r, i + 16)));
    }
    _mm512_storeu_ps(y + i, y0);
    _mm512_storeu_ps(y + i + 16, y1);
  }
  for (; i + 16 <= n; i += 16) {
    __m512 y0 = _mm512_loadu_ps(y + i);
    for (int64_t j = 0; j < nk; ++j)
      y0 = _mm512_add_ps(
          y0, _mm512_mul_ps(_mm512_set1_ps(s[j]), L::load16(static_cast<const uint8_t*>(x[j]), i)));
    _mm512_storeu_ps(y + i, y0);
  }
  for (; i < n; ++i)
    for (int64_t j = 0; j < nk; ++j) y[i] += s[j] * L::at(static_cast<const uint8_t*>(x[j]), i);
}

}  // namespace

void fill_kv_row_ops(OpsTable* t) {
  t->kv_f16.add_scaled_rows = add_scaled_rows<F16>;
  t->kv_bf16.add_scaled_rows = add_scaled_rows<BF16>;
  fill_kv_quant_ops(t);
}

}  // namespace strata::x86::avx512
