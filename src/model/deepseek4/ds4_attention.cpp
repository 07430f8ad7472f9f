#include "model/deepseek4/ds4_attention.h"

#include <cmath>
#include <limits>

#include "model/deepseek4/ds4_math.h"

namespace strata::ds4 {

void attend_with_sink(const float* q, int n_head, int hd, const float* const* keys, int64_t n_keys,
                      float scale, const float* sinks, float* scratch, float* out) {
  for (int h = 0; h < n_head; ++h) {
    const float* qh = q + static_cast<int64_t>(h) * hd;
    float* oh = out + static_cast<int64_t>(h) * hd;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n_keys; ++j) {
      float dot = 0.0f;
      for (int i = 0; i < hd; ++i) dot += qh[i] * keys[j][i];
      scratch[j] = dot * scale;
      mx = scratch[j] > mx ? scratch[j] : mx;
    }
    if (sinks) mx = sinks[h] > mx ? sinks[h] : mx;
    double sum = 0.0;
    for (int64_t j = 0; j < n_keys; ++j) {
      scratch[j] = std::exp(scratch[j] - mx);
      sum += static_cast<double>(scratch[j]);
    }
    if (sinks) sum += static_cast<double>(std::exp(sinks[h] - mx));
    for (int i = 0; i < hd; ++i) oh[i] = 0.0f;
    if (n_keys == 0 || sum <= 0.0) continue;
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < n_keys; ++j) {
      const float p = scratch[j] * inv;
      const float* v = keys[j];
      for (int i = 0; i < hd; ++i) oh[i] += p * v[i];
    }
  }
}

void grouped_out_a_f32(const float* o, const float* wo_a, int G, int o_lora, int64_t group_in, float* z) {
  for (int g = 0; g < G; ++g) {
    matvec_f32(wo_a + static_cast<int64_t>(g) * o_lora * group_in, o + g * group_in, o_lora, group_in,
               z + static_cast<int64_t>(g) * o_lora);
  }
}

}  // namespace strata::ds4
