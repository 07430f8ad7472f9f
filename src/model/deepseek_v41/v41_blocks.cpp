#include "model/deepseek_v41/v41_blocks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model/deepseek_v41/v41_quant.h"

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
                 bool small_kernel, float* out) {
  std::vector<float> p(n_keys);
  float mx = -1e30f;
  for (size_t j = 0; j < n_keys; ++j) {
    p[j] = dot_f32_blas(q, keys[j], hd, small_kernel) * scale;
    mx = std::max(mx, p[j]);
  }
  for (size_t j = 0; j < n_keys; ++j) p[j] = std::exp(p[j] - mx);
  // exp_scores.sum(-1) in torch's reduction order, then + exp(sink - max).
  const float denf = torch_sum_f32(p.data(), static_cast<int64_t>(n_keys)) + std::exp(sink - mx);
  for (size_t j = 0; j < n_keys; ++j) p[j] = bf16r(p[j]);
  for (int d = 0; d < hd; ++d) {
    double acc = 0.0;
    for (size_t j = 0; j < n_keys; ++j) acc += static_cast<double>(p[j]) * keys[j][d];
    out[d] = bf16r(static_cast<float>(acc) / denf);
  }
}

void hc_site_coeffs(const float* mixes, const float* scale, const float* base, int hc, int iters, float eps,
                    ds4::HcCoeffs* out) {
  auto sigmoid = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  for (int i = 0; i < hc; ++i) {
    out->pre[i] = sigmoid(base[i] + mixes[i] * scale[0]) + eps;
    out->post[i] = 2.0f * sigmoid(base[hc + i] + mixes[hc + i] * scale[1]);
  }
  auto& C = out->comb;
  for (int a = 0; a < hc; ++a) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int b = 0; b < hc; ++b) {
      const int k = 2 * hc + a * hc + b;
      C[a][b] = base[k] + mixes[k] * scale[2];
      mx = std::max(mx, C[a][b]);
    }
    float sum = 0.0f;
    for (int b = 0; b < hc; ++b) sum += (C[a][b] = torch_vec_expf(C[a][b] - mx));
    for (int b = 0; b < hc; ++b) C[a][b] = C[a][b] / sum + eps;
  }
  auto norm_cols = [&] {
    for (int b = 0; b < hc; ++b) {
      float sum = 0.0f;
      for (int a = 0; a < hc; ++a) sum += C[a][b];
      sum += eps;
      for (int a = 0; a < hc; ++a) C[a][b] /= sum;
    }
  };
  norm_cols();
  for (int it = 1; it < iters; ++it) {
    for (int a = 0; a < hc; ++a) {
      float sum = 0.0f;
      for (int b = 0; b < hc; ++b) sum += C[a][b];
      sum += eps;
      for (int b = 0; b < hc; ++b) C[a][b] /= sum;
    }
    norm_cols();
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
