#include "quant/weighted_quant.h"

#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "quant/fp8_fp4.h"
#include "quant/q5_ref.h"
#include "quant/k_fit.h"
#include "quant/round.h"

namespace strata {
namespace {

float row_sigma2(const float* x, int64_t n) {
  float s = 0;  // f32 in row order: the rounding llama-quantize's importance weights have
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s / static_cast<float>(n);
}

// Element weights of a block of m: qw·sqrt(σ² + x²); all ones when the block's qw is all zero
// (a column no calibration token reached says nothing).
void element_weights(const float* x, const float* qw, int m, float sigma2, float* w) {
  float total = 0;
  for (int i = 0; i < m; ++i) {
    w[i] = qw[i] * std::sqrt(sigma2 + x[i] * x[i]);
    total += w[i];
  }
  if (!(total > 0))
    for (int i = 0; i < m; ++i) w[i] = 1.0f;
}

// Element weights of a block of m: its columns' importance qw; all ones when it is all zero.
void column_weights(const float* qw, int m, float* w) {
  float total = 0;
  for (int i = 0; i < m; ++i) {
    w[i] = qw[i];
    total += w[i];
  }
  if (!(total > 0))
    for (int i = 0; i < m; ++i) w[i] = 1.0f;
}

// x ≈ scale·l with l in [-nmax, nmax-1]: the absmax grid -nmax/max, then the grids
// -(nmax + 0.1k)/max, k = ±1..±9, each with its least-squares scale; a grid replaces the best so
// far when its error Σw·x² − sumlx²/suml2 is smaller (compared as sumlx² > best·suml2, f32 in this
// order: the same levels as llama-quantize --imatrix). L: l + nmax (all 0 for an all-zero block).
// Returns the scale.
float fit_symmetric(const float* x, const float* w, int m, int nmax, int8_t* L) {
  float amax = 0, max = 0;
  for (int i = 0; i < m; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < 1e-15f) {
    for (int i = 0; i < m; ++i) L[i] = 0;
    return 0.0f;
  }
  auto level = [nmax](float t) {
    const int l = round_half_even(t);
    return l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l);
  };
  auto sums = [&](float iscale, float* sumlx, float* suml2) {
    *sumlx = *suml2 = 0;
    for (int i = 0; i < m; ++i) {
      const float l = static_cast<float>(level(iscale * x[i]));
      *sumlx += w[i] * x[i] * l;
      *suml2 += w[i] * l * l;
    }
  };
  auto keep = [&](float iscale) {
    for (int i = 0; i < m; ++i) L[i] = static_cast<int8_t>(level(iscale * x[i]) + nmax);
  };
  float sumlx, suml2;
  float iscale = static_cast<float>(-nmax) / max;
  sums(iscale, &sumlx, &suml2);
  keep(iscale);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    sums(iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      keep(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Re-rounds a block's levels to its stored scale d (the fp16 of the fitted one).
void reround(const float* x, int m, int nmax, float d, int8_t* L) {
  if (d == 0.0f) return;
  for (int i = 0; i < m; ++i) {
    int l = round_half_even(x[i] / d);
    l = l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l);
    L[i] = static_cast<int8_t>(l + nmax);
  }
}

// 32 five-bit levels (0..31) as Q5_0 / Q5_1 store them: the low nibbles of j and j + 16 in qs[j],
// the fifth bits in the 32-bit qh.
template <typename Level>
void pack_5bit(const Level* L, uint8_t qs[16], uint8_t qh_bytes[4]) {
  uint32_t qh = 0;
  for (int j = 0; j < QK4_0 / 2; ++j) {
    const int q0 = L[j], q1 = L[j + QK4_0 / 2];
    qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
    qh |= static_cast<uint32_t>(q0 >> 4) << j;
    qh |= static_cast<uint32_t>(q1 >> 4) << (j + QK4_0 / 2);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

void q4_0_weighted(const float* src, void* dst, int64_t n, const float* qw) {
  BlockQ4_0* b = static_cast<BlockQ4_0*>(dst);
  const float sigma2 = row_sigma2(src, n);
  float w[QK4_0];
  int8_t L[QK4_0];
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float* x = src + i * QK4_0;
    element_weights(x, qw + i * QK4_0, QK4_0, sigma2, w);
    b[i].d = f32_to_fp16(fit_symmetric(x, w, QK4_0, 8, L));
    for (int j = 0; j < QK4_0 / 2; ++j) b[i].qs[j] = static_cast<uint8_t>(L[j] | (L[j + QK4_0 / 2] << 4));
  }
}

void q5_0_weighted(const float* src, void* dst, int64_t n, const float* qw) {
  BlockQ5_0* b = static_cast<BlockQ5_0*>(dst);
  const float sigma2 = row_sigma2(src, n);
  float w[QK4_0];
  int8_t L[QK4_0];
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float* x = src + i * QK4_0;
    element_weights(x, qw + i * QK4_0, QK4_0, sigma2, w);
    b[i].d = f32_to_fp16(fit_symmetric(x, w, QK4_0, 16, L));
    pack_5bit(L, b[i].qs, b[i].qh);
  }
}

// Q5_1 (the fallback of Q5_K rows whose width is not a multiple of 256): each block's scale and
// min by the K-quants' weighted scale-and-min fit (37 grids), its levels as fitted (the same
// bytes as llama-quantize --imatrix gives).
void q5_1_weighted(const float* src, void* dst, int64_t n, const float* qw) {
  BlockQ5_1* b = static_cast<BlockQ5_1*>(dst);
  const float sigma2 = row_sigma2(src, n);
  float w[QK4_0];
  uint8_t L[QK4_0];
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float* x = src + i * QK4_0;
    element_weights(x, qw + i * QK4_0, QK4_0, sigma2, w);
    float neg_min = 0;
    const float scale = fit_scale_min(QK4_0, 31, x, w, L, &neg_min, -0.9f, 0.05f, 36);
    b[i].d = f32_to_fp16(scale);
    b[i].m = f32_to_fp16(-neg_min);
    pack_5bit(L, b[i].qs, b[i].qh);
  }
}

// Q6_K's groups of 16 weigh each element's error by its column's importance alone (no σ² + x²
// term, as llama-quantize does for this type).
void q6_k_weighted(const float* src, void* dst, int64_t n, const float* qw) {
  BlockQ6_K* b = static_cast<BlockQ6_K*>(dst);
  float w[16], scales[QK_K / 16];
  int8_t L[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    float max_scale = 0, max_abs = 0;
    for (int g = 0; g < QK_K / 16; ++g) {
      column_weights(qw + i * QK_K + 16 * g, 16, w);
      scales[g] = fit_symmetric(x + 16 * g, w, 16, 32, L + 16 * g);
      if (std::fabs(scales[g]) > max_abs) {
        max_abs = std::fabs(scales[g]);
        max_scale = scales[g];
      }
    }
    std::memset(&b[i], 0, sizeof(BlockQ6_K));
    if (max_abs < 1e-15f) continue;
    const float iscale = -128.0f / max_scale;
    b[i].d = f32_to_fp16(1.0f / iscale);
    const float d = fp16_to_f32(b[i].d);
    for (int g = 0; g < QK_K / 16; ++g) {
      const int s = round_half_even(iscale * scales[g]);
      b[i].scales[g] = static_cast<int8_t>(s < 127 ? s : 127);
      reround(x + 16 * g, 16, 32, d * static_cast<float>(b[i].scales[g]), L + 16 * g);
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

void q4_k_weighted(const float* src, void* dst, int64_t n, const float* qw) {
  for (int64_t i = 0; i < n / QK_K; ++i)
    quantize_block_q4_k_weighted(src + i * QK_K, qw + i * QK_K, static_cast<BlockQ4_K*>(dst) + i);
}

void q5_k_weighted(const float* src, void* dst, int64_t n, const float* qw) {
  for (int64_t i = 0; i < n / QK_K; ++i)
    quantize_block_q5_k_weighted(src + i * QK_K, qw + i * QK_K, static_cast<BlockQ5_K*>(dst) + i);
}

// The nearest E2M1 level (index into kMxfp4Values2x) of x at half-scale d, and its error².
int mxfp4_nearest(float x, float d, float* err2) {
  int best = 0;
  float be = std::fabs(static_cast<float>(kMxfp4Values2x[0]) * d - x);
  for (int k = 1; k < 16; ++k) {
    const float e = std::fabs(static_cast<float>(kMxfp4Values2x[k]) * d - x);
    if (e < be) {
      best = k;
      be = e;
    }
  }
  *err2 = be * be;
  return best;
}

void mxfp4_weighted(const float* src, void* dst, int64_t n, const float* qw) {
  BlockMxfp4* b = static_cast<BlockMxfp4*>(dst);
  const float sigma2 = row_sigma2(src, n);
  float w[QK_MXFP4];
  for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
    const float* x = src + i * QK_MXFP4;
    element_weights(x, qw + i * QK_MXFP4, QK_MXFP4, sigma2, w);
    float amax = 0;
    for (int j = 0; j < QK_MXFP4; ++j) amax = std::fabs(x[j]) > amax ? std::fabs(x[j]) : amax;
    // The absmax rule's exponent (ggml's), kept in the E8M0 range for tiny blocks.
    int e0 = amax > 0 ? static_cast<int>(std::floor(std::log2(amax))) - 2 + 127 : 0;
    e0 = e0 < 0 ? 0 : (e0 > 254 ? 254 : e0);
    int best_e = e0;
    float best = INFINITY;
    for (int e = e0 - 1; e <= e0 + 1 && amax > 0; ++e) {
      if (e < 0 || e > 254) continue;
      const float d = e8m0_to_f32_half(static_cast<uint8_t>(e));
      float err = 0, e2;
      for (int j = 0; j < QK_MXFP4; ++j) {
        mxfp4_nearest(x[j], d, &e2);
        err += w[j] * e2;
      }
      if (err < best) {
        best = err;
        best_e = e;
      }
    }
    b[i].e = static_cast<uint8_t>(best_e);
    const float d = e8m0_to_f32_half(b[i].e);
    float e2;
    for (int j = 0; j < QK_MXFP4 / 2; ++j)
      b[i].qs[j] = static_cast<uint8_t>(mxfp4_nearest(x[j], d, &e2) |
                                        (mxfp4_nearest(x[j + QK_MXFP4 / 2], d, &e2) << 4));
  }
}

}  // namespace

WeightedQuantFn weighted_quantizer(GgmlType t) {
  switch (t) {
    case GgmlType::q4_0:
      return q4_0_weighted;
    case GgmlType::q5_0:
      return q5_0_weighted;
    case GgmlType::q5_1:
      return q5_1_weighted;
    case GgmlType::q4_k:
      return q4_k_weighted;
    case GgmlType::q5_k:
      return q5_k_weighted;
    case GgmlType::q6_k:
      return q6_k_weighted;
    case GgmlType::mxfp4:
      return mxfp4_weighted;
    default:
      return nullptr;
  }
}

}  // namespace strata
