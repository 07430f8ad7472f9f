// Q8_0: blocks of 32 int8 with one fp16 scale. Used for weights and as the activation type of
// Q4_0 / Q8_0 / MXFP4 matmuls.
#include <cmath>

#include "base/fp16.h"
#include "quant/quant_ref.h"
#include "quant/round.h"

namespace strata {

void to_float_q8_0(const void* src, float* dst, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < QK8_0; ++j) dst[i * QK8_0 + j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void from_float_q8_0(const float* src, void* dst, int64_t n) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const float* x = src + i * QK8_0;
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) {
      int q = round_half_even(x[j] * id);
      q = q > 127 ? 127 : (q < -128 ? -128 : q);  // the SIMD pack instructions saturate
      b[i].qs[j] = static_cast<int8_t>(q);
    }
  }
}

float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* x) {
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    int32_t s = 0;
    for (int j = 0; j < QK8_0; ++j) s += a[i].qs[j] * b[i].qs[j];
    sum += static_cast<float>(s) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  return sum;
}

}  // namespace strata
