// Q5_K: Q4_K's super-block (8 sub-blocks of 32, 6-bit scales and mins) with a fifth bit per
// element in qh; value = fp16(d)·sc_j·q − fp16(dmin)·m_j, q in 0..31. The quantizer is in k_fit.cpp.
#include "base/fp16.h"
#include "quant/q4_k_scales.h"
#include "quant/quant_ref.h"
#include "quant/q5_ref.h"

namespace strata {
namespace {

// Level of element 64·c + 32·h + l of a super-block.
int q5_k_level(const BlockQ5_K& b, int c, int h, int l) {
  const uint8_t q = b.qs[32 * c + l];
  const int lo = h ? (q >> 4) : (q & 0x0f);
  return lo | (((b.qh[l] >> (2 * c + h)) & 1) << 4);
}

}  // namespace

void to_float_q5_k(const void* src, float* dst, int64_t n) {
  const BlockQ5_K* b = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    uint8_t sc[8], m[8];
    q4_k_unpack_scales(b[i].scales, sc, m);
    float* y = dst + i * QK_K;
    for (int c = 0; c < 4; ++c) {
      for (int h = 0; h < 2; ++h) {
        const float ds = d * sc[2 * c + h], dm = dmin * m[2 * c + h];
        for (int l = 0; l < 32; ++l)
          y[64 * c + 32 * h + l] = ds * static_cast<float>(q5_k_level(b[i], c, h, l)) - dm;
      }
    }
  }
}

float vec_dot_q5_k_q8_k(int64_t n, const void* w, const void* x) {
  const BlockQ5_K* a = static_cast<const BlockQ5_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    uint8_t sc[8], m[8];
    q4_k_unpack_scales(a[i].scales, sc, m);
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      const int8_t* y = b[i].qs + 32 * j;
      int32_t s = 0;
      for (int l = 0; l < 32; ++l) s += q5_k_level(a[i], j / 2, j % 2, l) * y[l];
      sumi += sc[j] * s;
      summ += m[j] * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
    }
    const float d = fp16_to_f32(a[i].d) * b[i].d;
    const float dmin = fp16_to_f32(a[i].dmin) * b[i].d;
    sum += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return sum;
}

}  // namespace strata
