#include "model/deepseek4/ds4_rope.h"

#include <algorithm>
#include <cmath>

#include "base/assert.h"

namespace strata::ds4 {

RopeParams rope_plain(int n_rot, float base) {
  RopeParams p;
  p.n_rot = n_rot;
  p.freq_base = base;
  return p;
}

RopeParams rope_yarn(int n_rot, float base, float factor, int n_ctx_orig, float beta_fast, float beta_slow) {
  RopeParams p;
  p.n_rot = n_rot;
  p.freq_base = base;
  p.freq_scale = 1.0f / factor;
  p.ext_factor = factor > 1.0f ? 1.0f : 0.0f;
  p.n_ctx_orig = n_ctx_orig;
  p.beta_fast = beta_fast;
  p.beta_slow = beta_slow;
  // llama.cpp deepseek4: attn_factor = 1/(1 + 0.1*ln(1/freq_scale)) cancels ggml's mscale.
  p.attn_factor = p.ext_factor != 0.0f ? 1.0f / (1.0f + 0.1f * std::log(1.0f / p.freq_scale)) : 1.0f;
  return p;
}

static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

void rope_yarn_corr_dims(const RopeParams& p, float dims[2]) {
  const float start = std::floor(corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base));
  const float end = std::ceil(corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(static_cast<float>(p.n_rot - 1), end);
}

void rope_cache(const RopeParams& p, int64_t pos, float sin_sign, float* cs) {
  STRATA_ASSERT(p.n_rot > 0 && p.n_rot % 2 == 0);
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float dims[2] = {0.0f, 0.0f};
  if (p.ext_factor != 0.0f) rope_yarn_corr_dims(p, dims);
  float theta = static_cast<float>(pos);
  for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
    const float theta_extrap = theta;
    const float theta_interp = p.freq_scale * theta_extrap;
    float th = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i0 / 2) - dims[0]) / std::max(0.001f, dims[1] - dims[0]);
      const float ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      th = theta_interp * (1.0f - ramp) + theta_extrap * ramp;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cs[i0] = std::cos(th) * mscale;
    cs[i0 + 1] = std::sin(th) * mscale * sin_sign;
    theta *= theta_scale;
  }
}

void rope_rows_cached(const float* cs, int n_rot, float* x, int64_t n_rows, int64_t row_len) {
  STRATA_ASSERT(row_len >= n_rot);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* seg = x + r * row_len + (row_len - n_rot);
    for (int i0 = 0; i0 < n_rot; i0 += 2) {
      const float c = cs[i0], s = cs[i0 + 1];
      const float x0 = seg[i0], x1 = seg[i0 + 1];
      seg[i0] = x0 * c - x1 * s;
      seg[i0 + 1] = x0 * s + x1 * c;
    }
  }
}

void rope_rows(const RopeParams& p, int64_t pos, float* x, int64_t n_rows, int64_t row_len, bool inverse) {
  float cs[kMaxRopeDims];  // no allocation inside a step
  STRATA_ASSERT(p.n_rot <= kMaxRopeDims);
  rope_cache(p, pos, inverse ? -1.0f : 1.0f, cs);
  rope_rows_cached(cs, p.n_rot, x, n_rows, row_len);
}

}  // namespace strata::ds4
