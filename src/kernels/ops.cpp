#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/assert.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx512/avx512_kernels.h"

namespace strata {

void fill_kv_row_ops_ref(OpsTable* t);  // kernels/kv_row_ops.cpp

// Scalar references (the scalar ISA's OpsTable); the public functions dispatch.
namespace {

void rms_norm_ref(const float* x, const float* w, float* y, int64_t n, float eps) {
  // ggml: sum of float products accumulated in double, mean rounded to float.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void softmax_scaled_ref(float* x, int64_t n, float scale, const float* mask, const float* sink) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * scale;
    if (mask) v += mask[i];
    x[i] = v;
    mx = std::max(mx, v);
  }
  if (sink) mx = std::max(mx, *sink);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = x[i] == -std::numeric_limits<float>::infinity() ? 0.0f : expf(x[i] - mx);
    x[i] = e;
    sum += static_cast<double>(e);
  }
  if (sink) sum += static_cast<double>(expf(*sink - mx));
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu_ref(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(g[i]) * u[i];
}

void swiglu_oai_ref(const float* g, const float* u, float* out, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(g[i], limit);
    const float y = std::min(std::max(u[i], -limit), limit);
    out[i] = x / (1.0f + expf(alpha * (-x))) * (y + 1.0f);
  }
}

void swiglu_clamped_ref(const float* g, const float* u, float* out, int64_t n, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(g[i], limit);
    const float y = std::min(std::max(u[i], -limit), limit);
    out[i] = silu(x) * y;
  }
}

void vec_add_ref(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void vec_add_scaled_ref(float* y, const float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += s * x[i];
}

float dot_f32_ref(const float* a, const float* b, int64_t n) {
  // 8 independent partial sums: vectorisable without -ffast-math, close to ggml's lane order.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  double sum = 0.0;
  for (int j = 0; j < 8; ++j) sum += acc[j];
  for (; i < n; ++i) sum += static_cast<double>(a[i] * b[i]);
  return static_cast<float>(sum);
}

void dot_f32_rows_ref(const float* q, const float* const* k, int64_t nk, int64_t n, float* out) {
  for (int64_t j = 0; j < nk; ++j) out[j] = dot_f32_ref(q, k[j], n);
}

void vec_add_scaled_rows_ref(float* y, const float* const* x, const float* s, int64_t nk, int64_t n) {
  for (int64_t j = 0; j < nk; ++j) vec_add_scaled_ref(y, x[j], s[j], n);
}

void rope_apply_ref(RopeStyle style, int n_rot, const float* cache, float* x) {
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const float c = cache[2 * i], s = cache[2 * i + 1];
    float* a;
    float* b;
    if (style == RopeStyle::rope_style_neox) {
      a = x + i;
      b = x + i + half;
    } else {
      a = x + 2 * i;
      b = x + 2 * i + 1;
    }
    const float x0 = *a, x1 = *b;
    *a = x0 * c - x1 * s;
    *b = x0 * s + x1 * c;
  }
}

void exp_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = expf(x[i]);
}

float exp_shift_sum_ref(float* x, int64_t n, float shift) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = expf(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

OpsTable make_ops(Isa isa) {
  OpsTable t;
  t.rms_norm = rms_norm_ref;
  t.softmax_scaled = softmax_scaled_ref;
  t.swiglu = swiglu_ref;
  t.swiglu_oai = swiglu_oai_ref;
  t.swiglu_clamped = swiglu_clamped_ref;
  t.vec_add = vec_add_ref;
  t.vec_add_scaled = vec_add_scaled_ref;
  t.dot_f32 = dot_f32_ref;
  t.dot_f32_rows = dot_f32_rows_ref;
  t.vec_add_scaled_rows = vec_add_scaled_rows_ref;
  t.rope_apply = rope_apply_ref;
  t.exp = exp_ref;
  t.exp_shift_sum = exp_shift_sum_ref;
  fill_kv_row_ops_ref(&t);
  // Each level overrides what it implements; AVX-512 starts from the AVX2 set.
  if (isa == Isa::avx2 || isa == Isa::avx512) x86::avx2::fill_ops(&t);
  if (isa == Isa::avx512) x86::avx512::fill_ops(&t);
  t.isa = isa;
  return t;
}

}  // namespace

const OpsTable& ops_table(Isa isa) {
  static const OpsTable scalar = make_ops(Isa::scalar);
  static const OpsTable avx2 = make_ops(Isa::avx2);
  static const OpsTable avx512 = make_ops(Isa::avx512);
  switch (isa) {
    case Isa::avx2:
      return avx2;
    case Isa::avx512:
      return avx512;
    default:
      return scalar;
  }
}

const OpsTable& ops_table() {
  static const OpsTable& t = ops_table(active_isa());
  return t;
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  ops_table().rms_norm(x, w, y, n, eps);
}

namespace {

float yarn_corr_dim(int n_rot, int n_ctx_orig, float beta, float base) {
  return static_cast<float>(n_rot) *
         logf(static_cast<float>(n_ctx_orig) / (beta * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * logf(base));
}

}  // namespace

void rope_yarn_corr_dims(const RopeParams& p, float dims[2]) {
  dims[0] = std::max(0.0f, floorf(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base)));
  dims[1] = std::min(static_cast<float>(p.n_rot - 1),
                     ceilf(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base)));
}

void rope_cache(const RopeParams& p, int64_t pos, float sin_sign, float* cache) {
  STRATA_ASSERT(p.n_rot > 0 && p.n_rot % 2 == 0);
  const float theta_scale = powf(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float low = 0.0f, high = 0.0f;
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) {
    float dims[2];
    rope_yarn_corr_dims(p, dims);
    low = dims[0];
    high = dims[1];
    mscale *= 1.0f + 0.1f * logf(1.0f / p.freq_scale);
  }
  float theta_extrap = static_cast<float>(pos);
  for (int i = 0; i < p.n_rot / 2; ++i) {
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
      const float ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      theta = theta_interp * (1.0f - ramp) + theta_extrap * ramp;
    }
    cache[2 * i + 0] = cosf(theta) * mscale;
    cache[2 * i + 1] = sinf(theta) * mscale * sin_sign;
    theta_extrap *= theta_scale;  // repeated f32 multiplication, as ggml does
  }
}

void rope_apply(RopeStyle style, int n_rot, const float* cache, float* x) {
  ops_table().rope_apply(style, n_rot, cache, x);
}

void softmax_inplace(float* x, int64_t n) {
  softmax_scaled(x, n, 1.0f, nullptr, nullptr);
}

void softmax_scaled(float* x, int64_t n, float scale, const float* mask, const float* sink) {
  ops_table().softmax_scaled(x, n, scale, mask, sink);
}

float silu(float x) {
  return x / (1.0f + expf(-x));
}
float sigmoid_f(float x) {
  return 1.0f / (1.0f + expf(-x));
}
float softplus(float x) {
  return x > 20.0f ? x : logf(1.0f + expf(x));
}

void swiglu(const float* g, const float* u, float* out, int64_t n) {
  ops_table().swiglu(g, u, out, n);
}

void swiglu_oai(const float* g, const float* u, float* out, int64_t n, float alpha, float limit) {
  ops_table().swiglu_oai(g, u, out, n, alpha, limit);
}

void swiglu_clamped(const float* g, const float* u, float* out, int64_t n, float limit) {
  ops_table().swiglu_clamped(g, u, out, n, limit);
}

void vec_add(float* y, const float* x, int64_t n) {
  ops_table().vec_add(y, x, n);
}

void vec_add_scaled(float* y, const float* x, float s, int64_t n) {
  ops_table().vec_add_scaled(y, x, s, n);
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return ops_table().dot_f32(a, b, n);
}

void top_k(const float* x, int n, int k, int32_t* idx_out) {
  STRATA_ASSERT(k > 0 && k <= n);
  // Selection by insertion into a sorted prefix: k and n are small (experts), no allocation.
  int m = 0;
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    if (m == k && !(v > x[idx_out[k - 1]])) continue;
    int j = m < k ? m++ : k - 1;
    while (j > 0 && v > x[idx_out[j - 1]]) {
      idx_out[j] = idx_out[j - 1];
      --j;
    }
    idx_out[j] = i;
  }
}

}  // namespace strata
