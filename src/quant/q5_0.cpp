// Q5_0: blocks of 32 5-bit values with one fp16 scale; value = d·(q − 16). The low nibbles are
// ordered as Q4_0's (byte j: element j low, element j+16 high); bit j of the 32-bit qh is
// element j's fifth bit.
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "quant/quant_ref.h"
#include "quant/q5_ref.h"

namespace strata {
namespace {

int q5_0_level(const BlockQ5_0& b, uint32_t qh, int e) {
  const int lo = e < QK4_0 / 2 ? (b.qs[e] & 0x0f) : (b.qs[e - QK4_0 / 2] >> 4);
  return (lo | static_cast<int>(((qh >> e) & 1u) << 4)) - 16;
}

}  // namespace

void to_float_q5_0(const void* src, float* dst, int64_t n) {
  const BlockQ5_0* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float d = fp16_to_f32(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int e = 0; e < QK4_0; ++e) dst[i * QK4_0 + e] = static_cast<float>(q5_0_level(b[i], qh, e)) * d;
  }
}

void from_float_q5_0(const float* src, void* dst, int64_t n) {
  BlockQ5_0* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float* x = src + i * QK4_0;
    // The signed value of largest magnitude maps to −16 (all 32 levels used), as Q4_0 does.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      int q0 = static_cast<int8_t>(x[j] * id + 16.5f);
      int q1 = static_cast<int8_t>(x[j + QK4_0 / 2] * id + 16.5f);
      q0 = q0 < 31 ? q0 : 31;
      q1 = q1 < 31 ? q1 : 31;
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + QK4_0 / 2);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* x) {
  const BlockQ5_0* a = static_cast<const BlockQ5_0*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    uint32_t qh;
    std::memcpy(&qh, a[i].qh, 4);
    int32_t s = 0;
    for (int e = 0; e < QK4_0; ++e) s += q5_0_level(a[i], qh, e) * b[i].qs[e];
    sum += static_cast<float>(s) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  return sum;
}

}  // namespace strata
