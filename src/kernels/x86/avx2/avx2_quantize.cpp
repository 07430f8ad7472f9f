// AVX2 activation quantizers, bit-identical to quant/'s from_float_q8_0 / from_float_q8_k.
#include <immintrin.h>

#include <cstring>

#include "base/fp16.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "quant/qtypes.h"

namespace strata::x86::avx2 {
namespace {

inline __m256 abs_ps(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

// 32 int32 (four vectors, element order) → 32 int8 with signed saturation, in order.
inline __m256i pack_i32x32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);  // 0-3 8-11 4-7 12-15 (per-lane interleave)
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i p = _mm256_packs_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline __m256i round_to_i32(__m256 v) {
  return _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

}  // namespace

void from_float_q8_0(const float* src, void* dst, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const float* x = src + i * QK8_0;
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 m =
        _mm256_max_ps(_mm256_max_ps(abs_ps(v0), abs_ps(v1)), _mm256_max_ps(abs_ps(v2), abs_ps(v3)));
    const float amax = hmax_f32x8(m);
    y[i].d = f2h(amax / 127.0f);
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m256i q = pack_i32x32(round_to_i32(_mm256_mul_ps(v0, id)), round_to_i32(_mm256_mul_ps(v1, id)),
                                  round_to_i32(_mm256_mul_ps(v2, id)), round_to_i32(_mm256_mul_ps(v3, id)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), q);
  }
}

void from_float_q8_k(const float* src, void* dst, int64_t n) {
  BlockQ8_K* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < QK_K; j += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + j)));
    const float amax = hmax_f32x8(m);
    if (amax == 0.0f) {
      y[i].d = 0.0f;
      std::memset(y[i].qs, 0, sizeof(y[i].qs));
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
      continue;
    }
    // The sign comes from the first element whose magnitude is amax (as the scalar scan does).
    float max = 0.0f;
    const __m256 am = _mm256_set1_ps(amax);
    for (int j = 0; j < QK_K; j += 8) {
      const int bits = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + j)), am, _CMP_EQ_OQ));
      if (bits) {
        max = x[j + __builtin_ctz(static_cast<unsigned>(bits))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 is = _mm256_set1_ps(iscale);
    const __m256i lim = _mm256_set1_epi32(127);
    for (int j = 0; j < QK_K; j += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        q[k] = _mm256_min_epi32(round_to_i32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), is)), lim);
      }
      y[i].bsums[j / 16] = static_cast<int16_t>(hsum_i32x8(_mm256_add_epi32(q[0], q[1])));
      y[i].bsums[j / 16 + 1] = static_cast<int16_t>(hsum_i32x8(_mm256_add_epi32(q[2], q[3])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + j), pack_i32x32(q[0], q[1], q[2], q[3]));
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace strata::x86::avx2
