// IQ4_NL: blocks of 32 4-bit indices into a fixed non-linear grid with one fp16 scale;
// value = d·kIq4NlValues[nibble], Q4_0's byte order (byte j: element j low, element j+16 high).
#include <cmath>

#include "base/fp16.h"
#include "quant/quant_ref.h"

namespace strata {

// ggml's kvalues_iq4nl: the format's grid (denser near 0, where most values lie).
const int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void to_float_iq4_nl(const void* src, float* dst, int64_t n) {
  const BlockIq4Nl* b = static_cast<const BlockIq4Nl*>(src);
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float d = fp16_to_f32(b[i].d);
    float* y = dst + i * QK4_0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      y[j] = static_cast<float>(kIq4NlValues[b[i].qs[j] & 0x0f]) * d;
      y[j + QK4_0 / 2] = static_cast<float>(kIq4NlValues[b[i].qs[j] >> 4]) * d;
    }
  }
}

namespace {

// The grid index nearest to v (grid units); a tie takes the lower index.
int nearest_index(float v) {
  int k = 0;
  for (int i = 0; i < 15; ++i)
    k += v > 0.5f * static_cast<float>(kIq4NlValues[i] + kIq4NlValues[i + 1]) ? 1 : 0;
  return k;
}

// Σ w·x·g and Σ w·g² of the block x at inverse scale id (g: the nearest grid values).
void fit(const float* x, const float* w, float id, float* sumqx, float* sumq2) {
  float a = 0.0f, b = 0.0f;
  for (int j = 0; j < QK4_0; ++j) {
    const float g = kIq4NlValues[nearest_index(x[j] * id)];
    a += w[j] * x[j] * g;
    b += w[j] * g * g;
  }
  *sumqx = a;
  *sumq2 = b;
}

}  // namespace

void from_float_iq4_nl(const float* src, void* dst, int64_t n) {
  constexpr int kTries = 7;  // candidate scales: max ↦ −127 + t, t in [−kTries, kTries]
  BlockIq4Nl* b = static_cast<BlockIq4Nl*>(dst);
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float* x = src + i * QK4_0;
    float amax = 0.0f, max = 0.0f, w[QK4_0];
    for (int j = 0; j < QK4_0; ++j) {
      w[j] = x[j] * x[j];
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    float d = 0.0f;
    if (amax > 0.0f) {
      // The candidate whose least-squares scale explains most of Σ w·x² (largest Σwxg² / Σwg²).
      float best = -1.0f;
      for (int t = -kTries; t <= kTries; ++t) {
        float sumqx, sumq2;
        fit(x, w, static_cast<float>(kIq4NlValues[0] + t) / max, &sumqx, &sumq2);
        if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
          best = sumqx * sumqx / sumq2;
          d = sumqx / sumq2;
        }
      }
    }
    b[i].d = f32_to_fp16(d);
    // Indices for the scale as stored.
    const float ds = fp16_to_f32(b[i].d);
    const float id = ds != 0.0f ? 1.0f / ds : 0.0f;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int q0 = nearest_index(x[j] * id), q1 = nearest_index(x[j + QK4_0 / 2] * id);
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

float vec_dot_iq4_nl_q8_0(int64_t n, const void* w, const void* x) {
  const BlockIq4Nl* a = static_cast<const BlockIq4Nl*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    int32_t s = 0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      s += kIq4NlValues[a[i].qs[j] & 0x0f] * b[i].qs[j];
      s += kIq4NlValues[a[i].qs[j] >> 4] * b[i].qs[j + QK4_0 / 2];
    }
    sum += static_cast<float>(s) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  return sum;
}

}  // namespace strata
