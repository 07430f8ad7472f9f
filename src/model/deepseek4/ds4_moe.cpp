#include "model/deepseek4/ds4_moe.h"

#include <algorithm>
#include <cmath>

#include "model/deepseek4/ds4_math.h"

namespace strata::ds4 {

void sqrt_softplus_scores(const float* logits, int n_expert, float* scores) {
  for (int e = 0; e < n_expert; ++e) scores[e] = std::sqrt(softplusf(logits[e]));
}

void route_weights(const float* scores, const int32_t* ids, int k, bool norm_w, float scale, float* weights) {
  double sum = 0.0;  // ggml sum_rows: double accumulator
  for (int i = 0; i < k; ++i) {
    weights[i] = scores[ids[i]];
    sum += static_cast<double>(weights[i]);
  }
  if (norm_w) {
    const float den = std::max(static_cast<float>(sum), kMoeMinWeightSum);
    for (int i = 0; i < k; ++i) weights[i] /= den;
  }
  for (int i = 0; i < k; ++i) weights[i] *= scale;
}

void route_topk(const float* scores, const float* bias, int n_expert, int k, bool norm_w, float scale,
                int32_t* ids, float* weights) {
  // k passes of an arg-max over the not-yet-chosen experts (k is small): no allocation, ties
  // to the lower expert id, descending order like a stable sort.
  for (int i = 0; i < k; ++i) {
    int best = -1;
    float best_v = 0.0f;
    for (int e = 0; e < n_expert; ++e) {
      bool taken = false;
      for (int j = 0; j < i && !taken; ++j) taken = ids[j] == e;
      if (taken) continue;
      const float v = bias ? scores[e] + bias[e] : scores[e];
      if (best < 0 || v > best_v) {
        best = e;
        best_v = v;
      }
    }
    ids[i] = best;
  }
  route_weights(scores, ids, k, norm_w, scale, weights);
}

}  // namespace strata::ds4
