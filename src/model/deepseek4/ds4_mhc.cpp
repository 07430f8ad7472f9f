#include "model/deepseek4/ds4_mhc.h"

#include "base/assert.h"
#include "model/deepseek4/ds4_math.h"

namespace strata::ds4 {

void hc_mixes(const float* H, int hc, int64_t d, const float* fn, int n_mix, float eps, float* mixes) {
  const int64_t n = hc * d;
  const float s = rms_scale(H, n, eps);
  for (int k = 0; k < n_mix; ++k) {
    const float* w = fn + k * n;
    float acc = 0.0f;
    for (int64_t i = 0; i < n; ++i) acc += w[i] * (H[i] * s);
    mixes[k] = acc;
  }
}

void hc_sinkhorn(float* C, int hc, int iters, float hc_eps) {
  STRATA_ASSERT(hc > 0 && hc <= kHcMax);
  auto norm_cols = [&] {
    for (int t = 0; t < hc; ++t) {
      float sum = 0.0f;
      for (int s = 0; s < hc; ++s) sum += C[s * hc + t];
      sum += hc_eps;
      for (int s = 0; s < hc; ++s) C[s * hc + t] /= sum;
    }
  };
  auto norm_rows = [&] {
    for (int s = 0; s < hc; ++s) {
      float sum = 0.0f;
      for (int t = 0; t < hc; ++t) sum += C[s * hc + t];
      sum += hc_eps;
      for (int t = 0; t < hc; ++t) C[s * hc + t] /= sum;
    }
  };
  for (int s = 0; s < hc; ++s) {
    softmax_inplace(C + s * hc, hc);
    for (int t = 0; t < hc; ++t) C[s * hc + t] += hc_eps;
  }
  norm_cols();
  for (int it = 1; it < iters; ++it) {
    norm_rows();
    norm_cols();
  }
}

void hc_coeffs(const float* mixes, const float* scale, const float* base, int hc, int iters, float hc_eps,
               HcCoeffs* out) {
  STRATA_ASSERT(hc > 0 && hc <= kHcMax);
  for (int i = 0; i < hc; ++i) {
    out->pre[i] = sigmoidf(mixes[i] * scale[0] + base[i]) + hc_eps;
    out->post[i] = 2.0f * sigmoidf(mixes[hc + i] * scale[1] + base[hc + i]);
  }
  float C[kHcMax * kHcMax];
  for (int k = 0; k < hc * hc; ++k) C[k] = mixes[2 * hc + k] * scale[2] + base[2 * hc + k];
  hc_sinkhorn(C, hc, iters, hc_eps);
  for (int s = 0; s < hc; ++s)
    for (int t = 0; t < hc; ++t) out->comb[s][t] = C[s * hc + t];
}

void hc_head_weights(const float* mixes, const float* scale, const float* base, int hc, float hc_eps,
                     float* p) {
  for (int i = 0; i < hc; ++i) p[i] = sigmoidf(mixes[i] * scale[0] + base[i]) + hc_eps;
}

void hc_collapse(const float* H, const float* w, int hc, int64_t d, float* u) {
  for (int64_t k = 0; k < d; ++k) u[k] = H[k] * w[0];
  for (int i = 1; i < hc; ++i) {
    const float* h = H + i * d;
    for (int64_t k = 0; k < d; ++k) u[k] += h[k] * w[i];
  }
}

void hc_post(const float* y, const float* H, const HcCoeffs& c, int hc, int64_t d, float* H_out) {
  for (int t = 0; t < hc; ++t) {
    float* o = H_out + t * d;
    for (int64_t k = 0; k < d; ++k) o[k] = y[k] * c.post[t];
    for (int s = 0; s < hc; ++s) {
      const float* h = H + s * d;
      const float w = c.comb[s][t];
      for (int64_t k = 0; k < d; ++k) o[k] += h[k] * w;
    }
  }
}

}  // namespace strata::ds4
