#include "model/deepseek4/ds4_rope.h"

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

void rope_rows_cached(const float* cs, int n_rot, float* x, int64_t n_rows, int64_t row_len) {
  STRATA_ASSERT(row_len >= n_rot);
  for (int64_t r = 0; r < n_rows; ++r)
    rope_apply(RopeStyle::rope_style_norm, n_rot, cs, x + r * row_len + (row_len - n_rot));
}

void rope_rows(const RopeParams& p, int64_t pos, float* x, int64_t n_rows, int64_t row_len, bool inverse) {
  float cs[kMaxRopeDims];  // no allocation inside a step
  STRATA_ASSERT(p.n_rot <= kMaxRopeDims);
  rope_cache(p, pos, inverse ? -1.0f : 1.0f, cs);
  rope_rows_cached(cs, p.n_rot, x, n_rows, row_len);
}

}  // namespace strata::ds4
