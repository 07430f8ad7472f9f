// Scalar numerics shared by the DeepSeek-V4 blocks, written to round like ggml-cpu so that
// strata lands within ~1e-5 of the llama.cpp fixtures (fixtures README §6):
//   RMSNorm: sum of float squares accumulated in double, mean rounded to float, 1/sqrtf.
//   softmax: max-subtracted expf, sum in double, multiply by (float)(1/sum).
//   sigmoid 1/(1+expf(-x)), SiLU x/(1+expf(-x)), softplus x > 20 ? x : logf(1+expf(x)).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace strata::ds4 {

// 1 / sqrt(mean(x^2) + eps) over n values.
inline float rms_scale(const float* x, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}

// y = x * rms_scale(x) * w  (w may be null: unweighted). In place allowed (y == x).
inline void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
  const float s = rms_scale(x, n, eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * s) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
  }
}

// In-place softmax over n values; -inf entries get probability 0. PRECOND: some x finite.
inline void softmax_inplace(float* x, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += static_cast<double>(x[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

inline float sigmoidf(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
inline float siluf(float x) {
  return x / (1.0f + std::exp(-x));
}
inline float softplusf(float x) {
  return x > 20.0f ? x : std::log(1.0f + std::exp(x));
}

// y[o] = sum_i W[o][i] * x[i]; W row-major [n_out][n_in] f32 (a GGUF {n_in, n_out} tensor).
inline void matvec_f32(const float* W, const float* x, int64_t n_out, int64_t n_in, float* y) {
  for (int64_t o = 0; o < n_out; ++o) {
    const float* w = W + o * n_in;
    float acc = 0.0f;
    for (int64_t i = 0; i < n_in; ++i) acc += w[i] * x[i];
    y[o] = acc;
  }
}

}  // namespace strata::ds4
