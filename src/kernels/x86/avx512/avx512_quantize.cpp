// AVX-512 activation quantizers, bit-identical to quant/'s from_float_q8_0 / from_float_q8_k.
// GCC 12 flags its own AVX-512 intrinsics (they start from _mm512_undefined_*) as
// maybe-uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "base/fp16.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/qtypes.h"

namespace strata::x86::avx512 {
namespace {

inline __m512i round_to_i32(__m512 v) {
  return _mm512_cvtps_epi32(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline void store16_i8(int8_t* p, __m512i v) {  // signed saturation, like the scalar clamp
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtsepi32_epi8(v));
}

}  // namespace

void from_float_q8_0(const float* src, void* dst, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const __m512 v0 = _mm512_loadu_ps(src + i * QK8_0), v1 = _mm512_loadu_ps(src + i * QK8_0 + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    y[i].d = f2h(amax / 127.0f);
    const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    store16_i8(y[i].qs, round_to_i32(_mm512_mul_ps(v0, id)));
    store16_i8(y[i].qs + 16, round_to_i32(_mm512_mul_ps(v1, id)));
  }
}

void from_float_q8_k(const float* src, void* dst, int64_t n) {
  BlockQ8_K* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < QK_K; j += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.0f) {
      y[i].d = 0.0f;
      std::memset(y[i].qs, 0, sizeof(y[i].qs));
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
      continue;
    }
    // The sign comes from the first element whose magnitude is amax (as the scalar scan does).
    float max = 0.0f;
    const __m512 am = _mm512_set1_ps(amax);
    for (int j = 0; j < QK_K; j += 16) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)), am, _CMP_EQ_OQ);
      if (hit) {
        max = x[j + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 is = _mm512_set1_ps(iscale);
    const __m512i lim = _mm512_set1_epi32(127);
    for (int j = 0; j < QK_K; j += 16) {
      const __m512i q = _mm512_min_epi32(round_to_i32(_mm512_mul_ps(_mm512_loadu_ps(x + j), is)), lim);
      y[i].bsums[j / 16] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
      store16_i8(y[i].qs + j, q);
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace strata::x86::avx512
