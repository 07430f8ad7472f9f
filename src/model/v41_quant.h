// Numerics of the DeepSeek-V4.1 reference (PyTorch, bf16 activations) reproduced in f32:
//   bf16r(x)           — round an f32 to the nearest bf16 (what `.to(torch.bfloat16)` does);
//   e4m3_round(x)      — nearest float8_e4m3fn value (ties to even, subnormals 2^-9 apart);
//   fake_quant_fp8     — per-32 block: s = ceil_pow2(max(amax, 1e-4) * (1/448)),
//                        x <- e4m3(clamp(x/s, ±448)) * s         (window KV);
//   fake_quant_fp4     — per-32 block: s = ceil_pow2(max(amax, 6*2^-126) * (1/6)),
//                        x <- e2m1(clamp(x/s, ±6)) * s           (indexer q / keys, MXFP4-like);
//   fake_quant_fp4_e4m3 — per-16 block: s = e4m3(clamp(amax * (1/6), 2^-9, 448)),
//                        x <- e2m1(clamp(x/s, ±6)) * s           (compressed KV, NVFP4-like).
// e2m1 rounding is to nearest, ties to even, on the grid {0, .5, 1, 1.5, 2, 3, 4, 6}.
// All results are bf16-representable and returned rounded to bf16 like the reference.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/fp16.h"

namespace strata::v41 {

inline float bf16r(float x) {
  return bf16_to_f32(f32_to_bf16(x));
}

// Smallest power of two >= x (x > 0, normal): the UE8M0 scale of the reference kernels.
inline float ceil_pow2(float x) {
  uint32_t b = f32_bits(x);
  int32_t e = static_cast<int32_t>((b >> 23) & 0xff);
  if (b & 0x7fffffu) e += 1;
  return f32_from_bits(static_cast<uint32_t>(e) << 23);
}

inline float e4m3_round(float x) {
  const float a = std::fabs(x);
  if (!(a > 0.0f)) return x;  // 0 (and NaN passthrough)
  float r;
  if (a < 0.015625f) {  // below 2^-6: subnormal grid of 2^-9
    r = std::nearbyint(a * 512.0f) / 512.0f;
  } else {
    int e;
    std::frexp(a, &e);                           // a = f * 2^e, f in [0.5, 1)
    const float step = std::ldexp(1.0f, e - 4);  // 3 mantissa bits
    r = std::nearbyint(a / step) * step;
  }
  if (r > 448.0f) r = 448.0f;
  return std::copysign(r, x);
}

inline float e2m1_round(float x) {
  const float a = std::fabs(x);
  const float step = a < 2.0f ? 0.5f : (a < 4.0f ? 1.0f : 2.0f);
  return std::copysign(std::nearbyint(a / step) * step, x);
}

void fake_quant_fp8(float* x, int64_t n, int block = 32);
void fake_quant_fp4(float* x, int64_t n, int block = 32);
void fake_quant_fp4_e4m3(float* x, int64_t n, int block = 16);

// y[o] = bf16r(sum_i W[o][i] * x[i]) — a bf16 Linear / matmul / einsum as torch's CPU kernel
// (oneDNN, VDPBF16PS) computes it: one f32 accumulator, per input pair (2k, 2k+1) the product of
// 2k+1 added first, then that of 2k (bf16 x bf16 products are exact in f32), then one rounding.
// Measured bit-identical to F.linear and to the grouped wo_a einsum on bf16 tensors (plain input
// order, and exact-then-round, each differ near ties: e.g. deep layer 4's wo_a at position 0).
// W [n_out][n_in] f32 holding bf16 values.
void linear_bf16(const float* W, const float* x, int64_t n_out, int64_t n_in, float* y);
// Same without the final rounding (F32 weights / float32 activations).
void linear_f32(const float* W, const float* x, int64_t n_out, int64_t n_in, float* y);

// RMSNorm of the reference: y = bf16r(w * (x * rsqrt(mean(x^2) + eps))), all in f32.
void rms_norm_bf16(const float* x, const float* w, int64_t n, float eps, float* y);

}  // namespace strata::v41
