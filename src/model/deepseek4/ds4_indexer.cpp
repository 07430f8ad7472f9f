#include "model/deepseek4/ds4_indexer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/assert.h"

namespace strata::ds4 {

int hadamard_block(int head_dim) {
  if (head_dim <= 0 || head_dim % 64 != 0) return 0;
  int n = 64;
  while (head_dim % (n * 2) == 0) n *= 2;
  return n;
}

std::vector<float> hadamard_matrix(int n) {
  STRATA_ASSERT(n > 0 && (n & (n - 1)) == 0);
  std::vector<float> h(static_cast<size_t>(n) * n, 0.0f);
  h[0] = static_cast<float>(1.0 / std::sqrt(static_cast<float>(n)));
  for (int s = 1; s < n; s *= 2) {
    for (int i = 0; i < s; ++i) {
      for (int j = 0; j < s; ++j) {
        const float v = h[i * n + j];
        h[(i + s) * n + j] = v;
        h[i * n + (j + s)] = v;
        h[(i + s) * n + (j + s)] = -v;
      }
    }
  }
  return h;
}

void hadamard_rotate(const float* H, int n, float* x, int64_t len) {
  STRATA_ASSERT(len % n == 0 && n % 8 == 0 && n <= 1024);
  float tmp[1024];  // no allocation inside a step
  for (int64_t b = 0; b < len; b += n) {
    float* xb = x + b;
    // y_i = Σ_j H_ij x_j summed in j order; H is symmetric, so row j holds H_ij for every i and
    // all n sums advance together (vectorized, each one's additions in the same order)
    std::fill(tmp, tmp + n, 0.0f);
    for (int j = 0; j < n; ++j) {
      const float* hj = H + static_cast<int64_t>(j) * n;
      const float xj = xb[j];
      for (int i = 0; i < n; i += 8)  // n a power of two >= 64: 8 sums a step (SLP at -O2)
        for (int k = 0; k < 8; ++k) tmp[i + k] += hj[i + k] * xj;
    }
    std::copy(tmp, tmp + n, xb);
  }
}

void indexer_scores(const float* qi, const float* w, const float* keys, int64_t n_keys, int ih, int ihd,
                    float* scores) {
  for (int64_t s = 0; s < n_keys; ++s) {
    const float* k = keys + s * ihd;
    double acc = 0.0;  // ggml sum_rows over heads accumulates in double
    for (int h = 0; h < ih; ++h) {
      const float* q = qi + static_cast<int64_t>(h) * ihd;
      float dot = 0.0f;
      for (int i = 0; i < ihd; ++i) dot += q[i] * k[i];
      acc += static_cast<double>((dot > 0.0f ? dot : 0.0f) * w[h]);
    }
    scores[s] = static_cast<float>(acc);
  }
}

int64_t topk_indices(const float* scores, int64_t n, int64_t k, int32_t* idx, int32_t* order) {
  k = std::max<int64_t>(0, std::min(k, n));
  std::iota(order, order + n, 0);
  std::partial_sort(order, order + k, order + n, [&](int32_t a, int32_t b) {
    if (scores[a] != scores[b]) return scores[a] > scores[b];
    return a < b;
  });
  std::copy(order, order + k, idx);
  return k;
}

}  // namespace strata::ds4
