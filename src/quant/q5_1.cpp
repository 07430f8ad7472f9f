// Q5_1: blocks of 32 5-bit values with an fp16 scale and an fp16 min; value = d·q + m, the bits laid
// out as Q5_0's. Q8_1: its activation type, Q8_0 plus s = d·Σq (the min's share of a dot product).
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "quant/q5_ref.h"
#include "quant/round.h"

namespace strata {
namespace {

int q5_1_level(const BlockQ5_1& b, uint32_t qh, int e) {
  const int lo = e < QK4_0 / 2 ? (b.qs[e] & 0x0f) : (b.qs[e - QK4_0 / 2] >> 4);
  return lo | static_cast<int>(((qh >> e) & 1u) << 4);
}

}  // namespace

void to_float_q5_1(const void* src, float* dst, int64_t n) {
  const BlockQ5_1* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float d = fp16_to_f32(b[i].d), m = fp16_to_f32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int e = 0; e < QK4_0; ++e) dst[i * QK4_0 + e] = static_cast<float>(q5_1_level(b[i], qh, e)) * d + m;
  }
}

void from_float_q5_1(const float* src, void* dst, int64_t n) {
  BlockQ5_1* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float* x = src + i * QK4_0;
    float lo = x[0], hi = x[0];
    for (int j = 1; j < QK4_0; ++j) {
      lo = x[j] < lo ? x[j] : lo;
      hi = x[j] > hi ? x[j] : hi;
    }
    const float d = (hi - lo) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(lo);
    uint32_t qh = 0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int q0 = static_cast<uint8_t>((x[j] - lo) * id + 0.5f);
      const int q1 = static_cast<uint8_t>((x[j + QK4_0 / 2] - lo) * id + 0.5f);
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + QK4_0 / 2);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* x) {
  const BlockQ5_1* a = static_cast<const BlockQ5_1*>(w);
  const BlockQ8_1* b = static_cast<const BlockQ8_1*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    uint32_t qh;
    std::memcpy(&qh, a[i].qh, 4);
    int32_t s = 0;
    for (int e = 0; e < QK4_0; ++e) s += q5_1_level(a[i], qh, e) * b[i].qs[e];
    sum += (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d)) * static_cast<float>(s) +
           fp16_to_f32(a[i].m) * fp16_to_f32(b[i].s);
  }
  return sum;
}

void to_float_q8_1(const void* src, float* dst, int64_t n) {
  const BlockQ8_1* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < QK8_0; ++j) dst[i * QK8_0 + j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void from_float_q8_1(const float* src, void* dst, int64_t n) {
  BlockQ8_1* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const float* x = src + i * QK8_0;
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b[i].d = f32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < QK8_0; ++j) {
      int q = round_half_even(x[j] * id);
      q = q > 127 ? 127 : (q < -128 ? -128 : q);
      b[i].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    b[i].s = f32_to_fp16(d * static_cast<float>(sum));
  }
}

}  // namespace strata
