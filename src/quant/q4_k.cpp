// Q4_K: super-blocks of 256 = 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min
// packed into 12 bytes; value = fp16(d)·sc_j·q − fp16(dmin)·m_j, q a 4-bit nibble.
#include <algorithm>
#include <cmath>

#include "base/fp16.h"
#include "quant/quant_ref.h"
#include "quant/round.h"

namespace strata {

// Sub-blocks 0..3 keep scale and min in the low 6 bits of bytes j and j+4; sub-blocks 4..7 keep
// their low 4 bits in byte j+4 (scale low nibble, min high nibble) and their top 2 bits in the
// spare high bits of bytes j−4 (scale) and j (min).
void q4_k_scale_min(const uint8_t s[12], int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

void to_float_q4_k(const void* src, float* dst, int64_t n) {
  const BlockQ4_K* b = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    float* y = dst + i * QK_K;
    for (int c = 0; c < QK_K / 64; ++c) {
      uint8_t sc0, m0, sc1, m1;
      q4_k_scale_min(b[i].scales, 2 * c, &sc0, &m0);
      q4_k_scale_min(b[i].scales, 2 * c + 1, &sc1, &m1);
      const float d0 = d * sc0, min0 = dmin * m0, d1 = d * sc1, min1 = dmin * m1;
      const uint8_t* q = b[i].qs + 32 * c;
      for (int l = 0; l < 32; ++l) y[64 * c + l] = d0 * static_cast<float>(q[l] & 0x0f) - min0;
      for (int l = 0; l < 32; ++l) y[64 * c + 32 + l] = d1 * static_cast<float>(q[l] >> 4) - min1;
    }
  }
}

void from_float_q4_k(const float* src, void* dst, int64_t n) {
  BlockQ4_K* b = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    float scale[8], negmin[8];
    float max_scale = 0.0f, max_negmin = 0.0f;
    for (int j = 0; j < 8; ++j) {
      const float* xs = x + 32 * j;
      const float lo = std::min(0.0f, *std::min_element(xs, xs + 32));
      const float hi = *std::max_element(xs, xs + 32);
      scale[j] = (hi - lo) / 15.0f;
      negmin[j] = -lo;
      max_scale = std::max(max_scale, scale[j]);
      max_negmin = std::max(max_negmin, negmin[j]);
    }
    const float d = max_scale / 63.0f, dmin = max_negmin / 63.0f;
    b[i].d = f32_to_fp16(d);
    b[i].dmin = f32_to_fp16(dmin);
    const float dq = fp16_to_f32(b[i].d), dminq = fp16_to_f32(b[i].dmin);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
      ls[j] = static_cast<uint8_t>(std::clamp(dq > 0 ? round_half_even(scale[j] / dq) : 0, 0, 63));
      lm[j] = static_cast<uint8_t>(std::clamp(dminq > 0 ? round_half_even(negmin[j] / dminq) : 0, 0, 63));
    }
    for (int j = 0; j < 12; ++j) b[i].scales[j] = 0;
    for (int j = 0; j < 8; ++j) {
      if (j < 4) {
        b[i].scales[j] |= ls[j];
        b[i].scales[j + 4] |= lm[j];
      } else {
        b[i].scales[j + 4] = static_cast<uint8_t>((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
        b[i].scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
        b[i].scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
      }
    }
    for (int j = 0; j < 8; ++j) {
      const float sd = dq * ls[j], sm = dminq * lm[j];
      for (int l = 0; l < 32; ++l) {
        const int q = sd > 0 ? std::clamp(round_half_even((x[32 * j + l] + sm) / sd), 0, 15) : 0;
        uint8_t& byte = b[i].qs[32 * (j / 2) + l];
        byte = (j % 2 == 0) ? static_cast<uint8_t>((byte & 0xf0) | q)
                            : static_cast<uint8_t>((byte & 0x0f) | (q << 4));
      }
    }
  }
}

float vec_dot_q4_k_q8_k(int64_t n, const void* w, const void* x) {
  const BlockQ4_K* a = static_cast<const BlockQ4_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      q4_k_scale_min(a[i].scales, j, &sc, &m);
      const uint8_t* q = a[i].qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      const int8_t* y = b[i].qs + 32 * j;
      int32_t s = 0;
      for (int l = 0; l < 32; ++l) s += ((q[l] >> shift) & 0x0f) * y[l];
      sumi += sc * s;
      summ += m * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
    }
    const float d = fp16_to_f32(a[i].d) * b[i].d;
    const float dmin = fp16_to_f32(a[i].dmin) * b[i].d;
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return sum;
}

}  // namespace strata
