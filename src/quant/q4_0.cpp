// Q4_0: blocks of 32 4-bit values with one fp16 scale; value = d·(nibble − 8). Byte j holds
// element j in its low nibble and element j+16 in its high nibble.
#include <cmath>

#include "base/fp16.h"
#include "quant/quant_ref.h"

namespace strata {

void to_float_q4_0(const void* src, float* dst, int64_t n) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float d = fp16_to_f32(b[i].d);
    float* y = dst + i * QK4_0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0x0f) - 8) * d;
      y[j + QK4_0 / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void from_float_q4_0(const float* src, void* dst, int64_t n) {
  BlockQ4_0* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float* x = src + i * QK4_0;
    // The signed value of largest magnitude maps to −8, so the grid uses all 16 levels.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int q0 = static_cast<int8_t>(x[j] * id + 8.5f);
      const int q1 = static_cast<int8_t>(x[j + QK4_0 / 2] * id + 8.5f);
      b[i].qs[j] = static_cast<uint8_t>((q0 < 15 ? q0 : 15) | ((q1 < 15 ? q1 : 15) << 4));
    }
  }
}

float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* x) {
  const BlockQ4_0* a = static_cast<const BlockQ4_0*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    int32_t s = 0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      s += ((a[i].qs[j] & 0x0f) - 8) * b[i].qs[j];
      s += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + QK4_0 / 2];
    }
    sum += static_cast<float>(s) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  return sum;
}

}  // namespace strata
