#include "model/v41_blocks.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/v41_quant.h"

namespace strata::v41 {

void pool_ratio2(const float* kv0, const float* g0, const float* kv1, const float* g1, int64_t n,
                 float* out) {
  for (int64_t d = 0; d < n; ++d) {
    const float mx = std::max(g0[d], g1[d]);
    const float e0 = std::exp(g0[d] - mx), e1 = std::exp(g1[d] - mx);
    const float sum = e0 + e1;
    out[d] = bf16r(kv0[d] * (e0 / sum) + kv1[d] * (e1 / sum));
  }
}

void attend_head(const float* q, const float* const* keys, size_t n_keys, int hd, float scale, float sink,
                 float* out) {
  std::vector<float> p(n_keys);
  float mx = -1e30f;
  for (size_t j = 0; j < n_keys; ++j) {
    double dot = 0.0;
    for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * keys[j][d];
    p[j] = static_cast<float>(dot) * scale;
    mx = std::max(mx, p[j]);
  }
  double den = 0.0;
  for (size_t j = 0; j < n_keys; ++j) {
    p[j] = std::exp(p[j] - mx);
    den += p[j];
  }
  const float denf = static_cast<float>(den) + std::exp(sink - mx);
  for (size_t j = 0; j < n_keys; ++j) p[j] = bf16r(p[j]);
  for (int d = 0; d < hd; ++d) {
    double acc = 0.0;
    for (size_t j = 0; j < n_keys; ++j) acc += static_cast<double>(p[j]) * keys[j][d];
    out[d] = bf16r(static_cast<float>(acc) / denf);
  }
}

void hc_collapse(const float* H, const float* w, int hc, int64_t dim, float* u) {
  for (int64_t d = 0; d < dim; ++d) {
    float acc = 0.0f;
    for (int s = 0; s < hc; ++s) acc += w[s] * H[s * dim + d];
    u[d] = bf16r(acc);
  }
}

void hc_post(const ds4::HcCoeffs& co, const float* y, int hc, int64_t dim, float* H) {
  std::vector<float> R(H, H + int64_t{hc} * dim);
  for (int t = 0; t < hc; ++t)
    for (int64_t d = 0; d < dim; ++d) {
      float mix = 0.0f;
      for (int s = 0; s < hc; ++s) mix += co.comb[s][t] * R[s * dim + d];
      H[t * dim + d] = bf16r(co.post[t] * y[d] + mix);
    }
}

}  // namespace strata::v41
