#include "quant/weight_quant.h"

#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "quant/k_fit.h"
#include "quant/q5_ref.h"
#include "quant/round.h"

namespace strata {

void quantize_weights_q8_0(const float* src, void* dst, int64_t n) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const float* x = src + i * QK8_0;
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) {
      const float a = std::fabs(x[j]);
      amax = amax > a ? amax : a;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) {
      const float q = std::round(x[j] * id);  // half away from zero; |q| <= 127 by construction
      b[i].qs[j] = static_cast<int8_t>(q > 127.0f ? 127.0f : (q < -128.0f ? -128.0f : q));
    }
  }
}

namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Levels l in [-nmax, nmax-1] for x / scale, scale = 1 / grid (grid = -(nmax + step) / max).
struct GroupFit {
  float sumlx = 0.0f;  // Σ w·x·l
  float suml2 = 0.0f;  // Σ w·l²
};

GroupFit fit_group(const float* x, int n, int nmax, float grid, int8_t* levels) {
  GroupFit f;
  for (int i = 0; i < n; ++i) {
    int l = round_half_even(grid * x[i]);
    l = l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l);
    if (levels) levels[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const float lf = static_cast<float>(l);
    f.sumlx += w * x[i] * lf;
    f.suml2 += w * lf * lf;
  }
  return f;
}

// The least-squares scale of a group of n values on the signed grid of 2·nmax levels, trying the
// grids nmax + 0.1·k (k = -9..9) and keeping the one of smallest weighted error; levels (biased by
// nmax) of the winner in L. Returns the scale (0 for an all-zero group).
float fit_group_scale(const float* x, int n, int nmax, int8_t* L) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  GroupFit f = fit_group(x, n, nmax, -fnmax / max, L);
  float scale = f.suml2 != 0.0f ? f.sumlx / f.suml2 : 0.0f;
  float best = scale * f.sumlx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    const float grid = -(fnmax + 0.1f * static_cast<float>(k)) / max;
    f = fit_group(x, n, nmax, grid, nullptr);
    if (f.suml2 > 0.0f && f.sumlx * f.sumlx > best * f.suml2) {
      fit_group(x, n, nmax, grid, L);
      scale = f.sumlx / f.suml2;
      best = scale * f.sumlx;
    }
  }
  return scale;
}

}  // namespace

void quantize_weights_q6_k(const float* src, void* dst, int64_t n) {
  BlockQ6_K* b = static_cast<BlockQ6_K*>(dst);
  int8_t L[QK_K];
  float scales[QK_K / 16];
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int g = 0; g < QK_K / 16; ++g) {
      scales[g] = fit_group_scale(x + 16 * g, 16, 32, L + 16 * g);
      if (std::fabs(scales[g]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[g]);
        max_scale = scales[g];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&b[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.0f / max_scale;
    b[i].d = f32_to_fp16(1.0f / iscale);
    for (int g = 0; g < QK_K / 16; ++g) {
      const int s = round_half_even(iscale * scales[g]);
      b[i].scales[g] = static_cast<int8_t>(s < 127 ? s : 127);
    }
    const float d = fp16_to_f32(b[i].d);
    for (int g = 0; g < QK_K / 16; ++g) {
      const float gd = d * static_cast<float>(b[i].scales[g]);
      if (gd == 0.0f) continue;  // the group keeps its fitted levels
      for (int l = 0; l < 16; ++l) {
        int q = round_half_even(x[16 * g + l] / gd);
        q = q < -32 ? -32 : (q > 31 ? 31 : q);
        L[16 * g + l] = static_cast<int8_t>(q + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = b[i].ql + 64 * h;
      uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* v = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = v[l], q1 = v[l + 32], q2 = v[l + 64], q3 = v[l + 96];
        ql[l] = static_cast<uint8_t>((q0 & 0x0f) | ((q2 & 0x0f) << 4));
        ql[l + 32] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
        qh[l] = static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
      }
    }
  }
}

FromFloatFn weight_quantizer(GgmlType t) {
  switch (t) {
    case GgmlType::f32:
      return from_float_f32;
    case GgmlType::f16:
      return from_float_f16;
    case GgmlType::bf16:
      return from_float_bf16;
    case GgmlType::q8_0:
      return quantize_weights_q8_0;
    case GgmlType::q4_0:
      return from_float_q4_0;
    case GgmlType::mxfp4:
      return from_float_mxfp4;
    case GgmlType::nvfp4:
      return from_float_nvfp4;  // searched scales: not the bytes of ggml's amax/6 reference
    case GgmlType::q5_0:
      return from_float_q5_0;
    case GgmlType::q5_1:
      return from_float_q5_1;
    case GgmlType::q4_k:
      return quantize_weights_q4_k;
    case GgmlType::q5_k:
      return from_float_q5_k;
    case GgmlType::q6_k:
      return quantize_weights_q6_k;
    default:
      return nullptr;
  }
}

}  // namespace strata
