// Q6_K: super-blocks of 256 = 16 sub-blocks of 16 with int8 scales and one fp16 d;
// q = (4 low bits from ql | 2 high bits from qh) − 32, value = d·scale_j·q.
// Within each half of 128 elements, element g·32 + l (g = 0..3) takes the low (g < 2) or high
// nibble of ql[l + 32·(g % 2)] and bits 2g..2g+1 of qh[l].
#include <algorithm>
#include <cmath>

#include "base/fp16.h"
#include "quant/quant_ref.h"
#include "quant/round.h"

namespace strata {
namespace {

// Unpack the 256 signed 6-bit values of one block into q[256].
void q6_k_unpack(const BlockQ6_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int8_t* out = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<int8_t>(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
      out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
      out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

}  // namespace

void to_float_q6_k(const void* src, float* dst, int64_t n) {
  const BlockQ6_K* b = static_cast<const BlockQ6_K*>(src);
  int8_t q[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    q6_k_unpack(b[i], q);
    for (int e = 0; e < QK_K; ++e) {
      dst[i * QK_K + e] = d * static_cast<float>(b[i].scales[e / 16]) * static_cast<float>(q[e]);
    }
  }
}

void from_float_q6_k(const float* src, void* dst, int64_t n) {
  BlockQ6_K* b = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    float scale[16];
    float max_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      float amax = 0.0f;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * j + l]));
      scale[j] = amax / 31.0f;
      max_scale = std::max(max_scale, scale[j]);
    }
    const float d = max_scale / 127.0f;
    b[i].d = f32_to_fp16(d);
    const float dq = fp16_to_f32(b[i].d);
    int8_t q[QK_K];
    for (int j = 0; j < 16; ++j) {
      const int ls = std::clamp(dq > 0 ? round_half_even(scale[j] / dq) : 0, 0, 127);
      b[i].scales[j] = static_cast<int8_t>(ls);
      const float sd = dq * static_cast<float>(ls);
      for (int l = 0; l < 16; ++l) {
        q[16 * j + l] =
            static_cast<int8_t>(sd > 0 ? std::clamp(round_half_even(x[16 * j + l] / sd), -32, 31) : 0);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = b[i].ql + 64 * h;
      uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* v = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = v[l] + 32, q1 = v[l + 32] + 32, q2 = v[l + 64] + 32, q3 = v[l + 96] + 32;
        ql[l] = static_cast<uint8_t>((q0 & 0x0f) | ((q2 & 0x0f) << 4));
        ql[l + 32] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
        qh[l] = static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
      }
    }
  }
}

float vec_dot_q6_k_q8_k(int64_t n, const void* w, const void* x) {
  const BlockQ6_K* a = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  int8_t q[QK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    q6_k_unpack(a[i], q);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int l = 0; l < 16; ++l) s += q[16 * j + l] * b[i].qs[16 * j + l];
      sumi += a[i].scales[j] * s;
    }
    sum += (fp16_to_f32(a[i].d) * b[i].d) * static_cast<float>(sumi);
  }
  return sum;
}

}  // namespace strata
