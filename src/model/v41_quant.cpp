#include "model/v41_quant.h"

#include <algorithm>
#include <cmath>

namespace strata::v41 {

namespace {
float block_amax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}
}  // namespace

void fake_quant_fp8(float* x, int64_t n, int block) {
  for (int64_t b = 0; b + block <= n; b += block) {
    float* v = x + b;
    const float s = ceil_pow2(std::max(block_amax(v, block), 1e-4f) * (1.0f / 448.0f));
    for (int i = 0; i < block; ++i) v[i] = bf16r(e4m3_round(std::clamp(v[i] / s, -448.0f, 448.0f)) * s);
  }
}

void fake_quant_fp4(float* x, int64_t n, int block) {
  const float floor = 6.0f * std::ldexp(1.0f, -126);
  for (int64_t b = 0; b + block <= n; b += block) {
    float* v = x + b;
    const float s = ceil_pow2(std::max(block_amax(v, block), floor) * (1.0f / 6.0f));
    for (int i = 0; i < block; ++i) v[i] = bf16r(e2m1_round(std::clamp(v[i] / s, -6.0f, 6.0f)) * s);
  }
}

void fake_quant_fp4_e4m3(float* x, int64_t n, int block) {
  for (int64_t b = 0; b + block <= n; b += block) {
    float* v = x + b;
    const float s = e4m3_round(std::clamp(block_amax(v, block) * (1.0f / 6.0f), 1.0f / 512.0f, 448.0f));
    for (int i = 0; i < block; ++i) v[i] = bf16r(e2m1_round(std::clamp(v[i] / s, -6.0f, 6.0f)) * s);
  }
}

void linear_f32(const float* W, const float* x, int64_t n_out, int64_t n_in, float* y) {
  for (int64_t o = 0; o < n_out; ++o) {
    const float* w = W + o * n_in;
    double acc = 0.0;
    for (int64_t i = 0; i < n_in; ++i) acc += static_cast<double>(w[i]) * static_cast<double>(x[i]);
    y[o] = static_cast<float>(acc);
  }
}

void linear_bf16(const float* W, const float* x, int64_t n_out, int64_t n_in, float* y) {
  for (int64_t o = 0; o < n_out; ++o) {
    const float* w = W + o * n_in;
    float acc = 0.0f;
    int64_t i = 0;
    for (; i + 1 < n_in; i += 2) {  // one VDPBF16PS lane: the odd product first, then the even
      acc = std::fma(w[i + 1], x[i + 1], acc);
      acc = std::fma(w[i], x[i], acc);
    }
    if (i < n_in) acc = std::fma(w[i], x[i], acc);
    y[o] = bf16r(acc);
  }
}

void rms_norm_bf16(const float* x, const float* w, int64_t n, float eps, float* y) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  const float var = static_cast<float>(ss / static_cast<double>(n));
  const float r = 1.0f / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = bf16r(w ? w[i] * (x[i] * r) : x[i] * r);
}

}  // namespace strata::v41
