// Q8_K: the activation type of K-quant matmuls. Super-blocks of 256 int8 with an f32 scale and
// the sums of each 16 values (bsums), which let K-quant dot products apply their mins cheaply.
#include <cmath>
#include <cstring>

#include "quant/quant_ref.h"
#include "quant/round.h"

namespace strata {

void to_float_q8_k(const void* src, float* dst, int64_t n) {
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    for (int j = 0; j < QK_K; ++j) dst[i * QK_K + j] = b[i].d * static_cast<float>(b[i].qs[j]);
  }
}

void from_float_q8_k(const float* src, void* dst, int64_t n) {
  BlockQ8_K* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    // Signed value of the first element with the largest magnitude: it maps to exactly −127.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      b[i].d = 0.0f;
      std::memset(b[i].qs, 0, sizeof(b[i].qs));
      std::memset(b[i].bsums, 0, sizeof(b[i].bsums));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; ++j) {
      const int q = round_half_even(iscale * x[j]);
      b[i].qs[j] = static_cast<int8_t>(q < 127 ? q : 127);
    }
    for (int j = 0; j < QK_K / 16; ++j) {
      int s = 0;
      for (int k = 0; k < 16; ++k) s += b[i].qs[16 * j + k];
      b[i].bsums[j] = static_cast<int16_t>(s);
    }
    b[i].d = 1.0f / iscale;
  }
}

}  // namespace strata
