// MXFP4 (OCP microscaling FP4): blocks of 32 E2M1 values sharing one E8M0 exponent e.
// value = E2M1(nibble)·2^(e−127) = kMxfp4Values2x[nibble]·2^(e−128); same nibble order as Q4_0.
// The element and scale codecs (kMxfp4Values2x, e8m0_to_f32_half) are quant/fp8_fp4's.
#include <cmath>

#include "base/fp16.h"
#include "quant/fp8_fp4.h"
#include "quant/quant_ref.h"

namespace strata {

void to_float_mxfp4(const void* src, float* dst, int64_t n) {
  const BlockMxfp4* b = static_cast<const BlockMxfp4*>(src);
  for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
    const float d = e8m0_to_f32_half(b[i].e);
    float* y = dst + i * QK_MXFP4;
    for (int j = 0; j < QK_MXFP4 / 2; ++j) {
      y[j] = static_cast<float>(kMxfp4Values2x[b[i].qs[j] & 0x0f]) * d;
      y[j + QK_MXFP4 / 2] = static_cast<float>(kMxfp4Values2x[b[i].qs[j] >> 4]) * d;
    }
  }
}

namespace {
// Nearest grid value; the first of equally near ones wins (so +0 beats −0).
int mxfp4_nearest(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values2x[0]) * d - x);
  for (int k = 1; k < 16; ++k) {
    const float e = std::fabs(static_cast<float>(kMxfp4Values2x[k]) * d - x);
    if (e < best_err) {
      best = k;
      best_err = e;
    }
  }
  return best;
}
}  // namespace

void from_float_mxfp4(const float* src, void* dst, int64_t n) {
  BlockMxfp4* b = static_cast<BlockMxfp4*>(dst);
  for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
    const float* x = src + i * QK_MXFP4;
    float amax = 0.0f;
    for (int j = 0; j < QK_MXFP4; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    // Largest E2M1 magnitude is 6 = 1.5·2^2, so the block exponent is floor(log2 amax) − 2.
    float ef = amax > 0.0f ? std::floor(std::log2(amax)) - 2 + 127 : 0.0f;
    ef = ef < 0.0f ? 0.0f : (ef > 254.0f ? 254.0f : ef);  // out-of-range blocks saturate
    const uint8_t e = static_cast<uint8_t>(ef);
    const float d = e8m0_to_f32_half(e);
    b[i].e = e;
    for (int j = 0; j < QK_MXFP4 / 2; ++j) {
      b[i].qs[j] =
          static_cast<uint8_t>(mxfp4_nearest(x[j], d) | (mxfp4_nearest(x[j + QK_MXFP4 / 2], d) << 4));
    }
  }
}

float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* x) {
  const BlockMxfp4* a = static_cast<const BlockMxfp4*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
    int32_t s = 0;
    for (int j = 0; j < QK_MXFP4 / 2; ++j) {
      s += kMxfp4Values2x[a[i].qs[j] & 0x0f] * b[i].qs[j];
      s += kMxfp4Values2x[a[i].qs[j] >> 4] * b[i].qs[j + QK_MXFP4 / 2];
    }
    sum += (fp16_to_f32(b[i].d) * e8m0_to_f32_half(a[i].e)) * static_cast<float>(s);
  }
  return sum;
}

}  // namespace strata
