#include "quant/k_fit.h"

#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "quant/q4_k_scales.h"
#include "quant/quant_ref.h"
#include "quant/q5_ref.h"
#include "quant/round.h"

namespace strata {

float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                    float rdelta, int nstep) {
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::memset(L, 0, static_cast<size_t>(n));
    *neg_min = -lo;
    return 0.0f;
  }
  auto level = [nmax](float v) {
    const int l = round_half_even(v);
    return static_cast<uint8_t>(l < 0 ? 0 : (l > nmax ? nmax : l));
  };
  float iscale = static_cast<float>(nmax) / (hi - lo);
  float scale = 1 / iscale;
  float best = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = level(iscale * (x[i] - lo));
    const float diff = scale * static_cast<float>(L[i]) + lo - x[i];
    best += w[i] * (diff * diff);
  }
  uint8_t aux[256];
  for (int k = 0; k <= nstep; ++k) {
    iscale = (rmin + rdelta * static_cast<float>(k) + static_cast<float>(nmax)) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      aux[i] = level(iscale * (x[i] - lo));
      const float l = static_cast<float>(aux[i]);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (!(D > 0)) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / D;
    float m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (m > 0) {
      m = 0;
      s = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = s * static_cast<float>(aux[i]) + m - x[i];
      err += w[i] * (diff * diff);
    }
    if (err < best) {
      std::memcpy(L, aux, static_cast<size_t>(n));
      best = err;
      scale = s;
      lo = m;
    }
  }
  *neg_min = -lo;
  return scale;
}

namespace {

// The 6-bit levels of the 8 sub-block scales (or mins) against the largest one (llama-quantize's
// rule without an importance matrix); returns the grid step.
float grid_levels_max(const float v[8], uint8_t lv[8]) {
  float vmax = 0;
  for (int j = 0; j < 8; ++j) vmax = v[j] > vmax ? v[j] : vmax;
  const float inv = vmax > 0 ? 63.f / vmax : 0.f;
  for (int j = 0; j < 8; ++j) {
    const uint8_t l = static_cast<uint8_t>(round_half_even(inv * v[j]));
    lv[j] = l < 63 ? l : 63;
  }
  return vmax / 63.f;
}

// The 6-bit levels of v[0..8) (>= 0) weighted by sw (the sub-blocks' total importance): the grid
// of smallest weighted error among 63 ± 0.1·k (k = 0, ±1 .. ±4) steps over the largest value, then
// single levels moved while that raises Σwvl² / Σwl² (5 passes at most); returns the
// least-squares step of the final levels.
float grid_levels_weighted(const float v[8], const float sw[8], uint8_t lv[8]) {
  float vmax = 0;
  for (int j = 0; j < 8; ++j) vmax = v[j] > vmax ? v[j] : vmax;
  if (!(vmax > 0)) {
    std::memset(lv, 0, 8);
    return 0.f;
  }
  auto level = [](float t) {
    const int l = round_half_even(t);
    return l < 0 ? 0 : (l > 63 ? 63 : l);
  };
  auto grid_error = [&](float inv) {
    const float step = 1 / inv;
    float e = 0;
    for (int j = 0; j < 8; ++j) {
      const float diff = v[j] - step * static_cast<float>(level(inv * v[j]));
      e += sw[j] * diff * diff;
    }
    return e;
  };
  float best_inv = 63.f / vmax, best = grid_error(best_inv);
  for (int k = -4; k <= 4; ++k) {
    if (k == 0) continue;
    const float inv = (63.f + 0.1f * static_cast<float>(k)) / vmax;
    const float e = grid_error(inv);
    if (e < best) {
      best = e;
      best_inv = inv;
    }
  }
  int l[8];
  float sumlx = 0, suml2 = 0;
  for (int j = 0; j < 8; ++j) {
    l[j] = level(best_inv * v[j]);
    sumlx += sw[j] * v[j] * static_cast<float>(l[j]);
    suml2 += sw[j] * static_cast<float>(l[j]) * static_cast<float>(l[j]);
  }
  for (int pass = 0; pass < 5; ++pass) {
    bool moved = false;
    for (int j = 0; j < 8; ++j) {
      const float slx = sumlx - sw[j] * v[j] * static_cast<float>(l[j]);
      const float sl2 = suml2 - sw[j] * static_cast<float>(l[j]) * static_cast<float>(l[j]);
      if (!(slx > 0 && sl2 > 0)) continue;
      const int nl = level(v[j] * sl2 / slx);
      if (nl == l[j]) continue;
      const float nlx = slx + sw[j] * v[j] * static_cast<float>(nl);
      const float nl2 = sl2 + sw[j] * static_cast<float>(nl) * static_cast<float>(nl);
      if (nlx * nlx * suml2 > sumlx * sumlx * nl2) {
        l[j] = nl;
        sumlx = nlx;
        suml2 = nl2;
        moved = true;
      }
    }
    if (!moved) break;
  }
  for (int j = 0; j < 8; ++j) lv[j] = static_cast<uint8_t>(l[j]);
  return suml2 > 0 ? sumlx / suml2 : 0.f;
}

// Packs the 6-bit scale / min levels, stores the steps as fp16 and re-rounds every level of x to
// the stored scale and min (sub-blocks whose stored scale is 0 keep their fitted levels).
void k_pack_levels(const float* x, const uint8_t ls[8], const uint8_t lm[8], float d_step, float m_step,
                   int nmax, uint16_t* d, uint16_t* dmin, uint8_t packed[12], uint8_t L[256]) {
  std::memset(packed, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      packed[j] = ls[j];
      packed[j + 4] = lm[j];
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
  *d = f32_to_fp16(d_step);
  *dmin = f32_to_fp16(m_step);
  uint8_t sc[8], m[8];
  q4_k_unpack_scales(packed, sc, m);
  const float df = fp16_to_f32(*d), dminf = fp16_to_f32(*dmin);
  for (int j = 0; j < 8; ++j) {
    const float ds = df * static_cast<float>(sc[j]);
    if (ds == 0.0f) continue;  // the sub-block keeps its fitted levels
    const float dm = dminf * static_cast<float>(m[j]);
    for (int l = 0; l < 32; ++l) {
      const int q = round_half_even((x[32 * j + l] + dm) / ds);
      L[32 * j + l] = static_cast<uint8_t>(q < 0 ? 0 : (q > nmax ? nmax : q));
    }
  }
}

}  // namespace

void k_pack_scales_and_levels(const float* x, const float scales[8], const float mins[8], int nmax,
                              uint16_t* d, uint16_t* dmin, uint8_t packed[12], uint8_t L[256]) {
  uint8_t ls[8], lm[8];
  const float d_step = grid_levels_max(scales, ls);
  const float m_step = grid_levels_max(mins, lm);
  k_pack_levels(x, ls, lm, d_step, m_step, nmax, d, dmin, packed, L);
}

namespace {

// Sub-block weights without an importance matrix: rms of the sub-block + |x|.
void plain_weights(const float* x, float* w) {
  float sum_x2 = 0;
  for (int l = 0; l < 32; ++l) sum_x2 += x[l] * x[l];
  const float av_x = std::sqrt(sum_x2 / 32);
  for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(x[l]);
}

// Importance weights: qw · sqrt(σ² + x²) with σ² twice the super-block's mean square (so small
// values still count); an all-zero qw slice falls back to the plain weights.
void imatrix_weights(const float* xb, const float* x, const float* qw, float* w) {
  float sum_x2 = 0;
  for (int l = 0; l < 256; ++l) sum_x2 += xb[l] * xb[l];
  const float sigma2 = 2 * sum_x2 / 256;
  float total = 0;
  for (int l = 0; l < 32; ++l) {
    w[l] = qw[l] * std::sqrt(sigma2 + x[l] * x[l]);
    total += w[l];
  }
  if (!(total > 0)) plain_weights(x, w);
}

void pack_q4_k(const uint8_t L[256], BlockQ4_K* b) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l)
      b->qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void pack_q5_k(const uint8_t L[256], BlockQ5_K* b) {
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
      b->qh[l] |= static_cast<uint8_t>(((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1)));
      b->qs[32 * c + l] = static_cast<uint8_t>((l1 & 0x0f) | ((l2 & 0x0f) << 4));
    }
  }
}

// One super-block: fit each sub-block (plain weights when qw is null), pack.
template <typename Block>
void k_block(const float* x, const float* qw, int nmax, Block* b) {
  float scales[8], mins[8], w[32], sw[8];
  uint8_t L[256];
  for (int j = 0; j < 8; ++j) {
    if (qw) {
      imatrix_weights(x, x + 32 * j, qw + 32 * j, w);
      sw[j] = 0;
      for (int l = 0; l < 32; ++l) sw[j] += w[l];
      scales[j] = fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], -0.9f, 0.05f, 36);
    } else {
      plain_weights(x + 32 * j, w);
      scales[j] = nmax == 15 ? fit_scale_min(32, 15, x + 32 * j, w, L + 32 * j, &mins[j], -1.f, 0.1f, 20)
                             : fit_scale_min(32, 31, x + 32 * j, w, L + 32 * j, &mins[j], -0.5f, 0.1f, 15);
    }
  }
  if (qw) {  // the 6-bit scales and mins fitted under the sub-blocks' importance
    uint8_t ls[8], lm[8];
    const float d_step = grid_levels_weighted(scales, sw, ls);
    const float m_step = grid_levels_weighted(mins, sw, lm);
    k_pack_levels(x, ls, lm, d_step, m_step, nmax, &b->d, &b->dmin, b->scales, L);
  } else {
    k_pack_scales_and_levels(x, scales, mins, nmax, &b->d, &b->dmin, b->scales, L);
  }
  if constexpr (sizeof(Block) == sizeof(BlockQ4_K)) {
    pack_q4_k(L, b);
  } else {
    pack_q5_k(L, b);
  }
}

}  // namespace

void quantize_weights_q4_k(const float* src, void* dst, int64_t n) {
  BlockQ4_K* b = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) k_block(src + i * QK_K, nullptr, 15, &b[i]);
}

void from_float_q5_k(const float* src, void* dst, int64_t n) {
  BlockQ5_K* b = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) k_block(src + i * QK_K, nullptr, 31, &b[i]);
}

void quantize_block_q4_k_weighted(const float* x, const float* qw, void* block) {
  k_block(x, qw, 15, static_cast<BlockQ4_K*>(block));
}

void quantize_block_q5_k_weighted(const float* x, const float* qw, void* block) {
  k_block(x, qw, 31, static_cast<BlockQ5_K*>(block));
}

}  // namespace strata
