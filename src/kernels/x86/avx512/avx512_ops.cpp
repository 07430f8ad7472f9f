// AVX-512 element-wise ops (kernels/ops.h OpsTable): 16 lanes, masked tails. Compiled with
// -ffp-contract=off (src/CMakeLists.txt): a written multiply-then-add stays two roundings, as in
// the scalar reference. dot_f32 and dot_f32_rows stay the AVX2 ones (their 8-lane order is the
// reference's), and so does rope_apply (a head's few rotated pairs).
// GCC 12 flags its own AVX-512 intrinsics (they start from _mm512_undefined_*) as
// (maybe-)uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops.h"
#include "kernels/x86/avx512/avx512_kernels.h"

namespace strata::x86::avx512 {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

__mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
}

// f(i, k) over [0, n) in 16-lane steps: whole vectors with a constant full mask (plain loads and
// stores once inlined), then the tail's lanes.
template <class F>
inline __attribute__((always_inline)) void for_lanes(int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) f(i, __mmask16(0xffff));
  if (i < n) f(i, tail_mask(n - i));
}

// e^x, 16 lanes, within 2 ulp of std::exp (tests/kernels/ops_simd_test.cpp): x = n·ln2 + r with
// |r| <= ln2/2 (the ln2 split applied by FMA), e^r by its degree-7 Taylor polynomial, then
// VSCALEFPS multiplies by 2^n with one rounding (subnormal results included; n = 128 gives inf).
// Inputs above 89 are clamped to it (+inf); inputs below -104 (e^x rounds to +0: softmax masks'
// -inf) give +0 without computing, so that they never take the slow path of an underflowing
// multiply. NaN lanes return their input.
__m512 exp_f32x16(__m512 x) {
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_NLT_UQ);
  const __m512 xc = _mm512_maskz_min_ps(live, _mm512_set1_ps(89.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693147182464599609375f), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(1.904654323148236e-9f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512 e = _mm512_maskz_scalef_ps(live, p, n);
  return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// acc += the 16 lanes of v widened to double (lanes 0-7 into a, 8-15 into b).
void widen_sum(__m512d& a, __m512d& b, __m512 v) {
  a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  b = _mm512_add_pd(b, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);  // masked lanes add +0
    widen_sum(a, b, _mm512_mul_ps(v, v));
  });
  const double sum = _mm512_reduce_add_pd(_mm512_add_pd(a, b));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  const __m512 sv = _mm512_set1_ps(scale);
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), sv);
    if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, w + i));
    _mm512_mask_storeu_ps(y + i, k, v);
  });
}

void softmax_scaled(float* x, int64_t n, float scale, const float* mask, const float* sink) {
  const __m512 sv = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(kNegInf);
  __m512 mv = ninf;
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), sv);
    if (mask) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, mask + i));
    _mm512_mask_storeu_ps(x + i, k, v);
    mv = _mm512_mask_max_ps(mv, k, mv, v);
  });
  float mx = _mm512_reduce_max_ps(mv);
  if (sink) mx = std::max(mx, *sink);
  const __m512 mxv = _mm512_set1_ps(mx);
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    const __mmask16 live = k & _mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_UQ);  // -inf gives exactly 0
    const __m512 e = _mm512_maskz_mov_ps(live, exp_f32x16(_mm512_sub_ps(v, mxv)));
    _mm512_mask_storeu_ps(x + i, k, e);
    widen_sum(a, b, e);
  });
  double sum = _mm512_reduce_add_pd(_mm512_add_pd(a, b));
  if (sink) sum += static_cast<double>(expf(*sink - mx));
  const __m512 iv = _mm512_set1_ps(static_cast<float>(1.0 / sum));
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), iv));
  });
}

// g / (1 + e^-g): the scalar silu's arithmetic with the vector exp.
__m512 silu_f32x16(__m512 g) {
  const __m512 neg = _mm512_xor_ps(g, _mm512_set1_ps(-0.0f));
  return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), exp_f32x16(neg)));
}

void swiglu(const float* g, const float* u, float* out, int64_t n) {
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    const __m512 s = silu_f32x16(_mm512_maskz_loadu_ps(k, g + i));
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(k, u + i)));
  });
}

void swiglu_oai(const float* g, const float* u, float* out, int64_t n, float alpha, float limit) {
  const __m512 lim = _mm512_set1_ps(limit), nlim = _mm512_set1_ps(-limit), av = _mm512_set1_ps(alpha);
  const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    const __m512 x = _mm512_min_ps(lim, _mm512_maskz_loadu_ps(k, g + i));  // NaN kept, as std::min
    const __m512 y = _mm512_min_ps(lim, _mm512_max_ps(nlim, _mm512_maskz_loadu_ps(k, u + i)));
    const __m512 e = exp_f32x16(_mm512_mul_ps(av, _mm512_xor_ps(x, sign)));
    _mm512_mask_storeu_ps(out + i, k,
                          _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), _mm512_add_ps(y, one)));
  });
}

void swiglu_clamped(const float* g, const float* u, float* out, int64_t n, float limit) {
  const __m512 lim = _mm512_set1_ps(limit), nlim = _mm512_set1_ps(-limit);
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    const __m512 x = _mm512_min_ps(lim, _mm512_maskz_loadu_ps(k, g + i));
    const __m512 y = _mm512_min_ps(lim, _mm512_max_ps(nlim, _mm512_maskz_loadu_ps(k, u + i)));
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(silu_f32x16(x), y));
  });
}

void vec_add(float* y, const float* x, int64_t n) {
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    _mm512_mask_storeu_ps(y + i, k,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + i), _mm512_maskz_loadu_ps(k, x + i)));
  });
}

void vec_add_scaled(float* y, const float* x, float s, int64_t n) {
  const __m512 sv = _mm512_set1_ps(s);
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    const __m512 p = _mm512_mul_ps(sv, _mm512_maskz_loadu_ps(k, x + i));
    _mm512_mask_storeu_ps(y + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + i), p));
  });
}

// 64 outputs stay in registers across all keys; each key adds s·x with two roundings, in key
// order, as nk calls of vec_add_scaled would.
void vec_add_scaled_rows(float* y, const float* const* x, const float* s, int64_t nk, int64_t n) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);
    __m512 y2 = _mm512_loadu_ps(y + i + 32), y3 = _mm512_loadu_ps(y + i + 48);
    for (int64_t j = 0; j < nk; ++j) {
      const __m512 sv = _mm512_set1_ps(s[j]);
      const float* xj = x[j] + i;
      y0 = _mm512_add_ps(y0, _mm512_mul_ps(sv, _mm512_loadu_ps(xj)));
      y1 = _mm512_add_ps(y1, _mm512_mul_ps(sv, _mm512_loadu_ps(xj + 16)));
      y2 = _mm512_add_ps(y2, _mm512_mul_ps(sv, _mm512_loadu_ps(xj + 32)));
      y3 = _mm512_add_ps(y3, _mm512_mul_ps(sv, _mm512_loadu_ps(xj + 48)));
    }
    _mm512_storeu_ps(y + i, y0);
    _mm512_storeu_ps(y + i + 16, y1);
    _mm512_storeu_ps(y + i + 32, y2);
    _mm512_storeu_ps(y + i + 48, y3);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    __m512 y0 = _mm512_maskz_loadu_ps(k, y + i);
    for (int64_t j = 0; j < nk; ++j)
      y0 = _mm512_add_ps(y0, _mm512_mul_ps(_mm512_set1_ps(s[j]), _mm512_maskz_loadu_ps(k, x[j] + i)));
    _mm512_mask_storeu_ps(y + i, k, y0);
  }
}

void exp(const float* x, float* y, int64_t n) {
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    _mm512_mask_storeu_ps(y + i, k, exp_f32x16(_mm512_maskz_loadu_ps(k, x + i)));
  });
}

float exp_shift_sum(float* x, int64_t n, float shift) {
  const __m512 sv = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  for_lanes(n, [&](int64_t i, __mmask16 k) {
    const __m512 e = _mm512_maskz_mov_ps(k, exp_f32x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), sv)));
    _mm512_mask_storeu_ps(x + i, k, e);
    acc = _mm512_add_ps(acc, e);
  });
  return _mm512_reduce_add_ps(acc);
}

}  // namespace

void fill_ops(OpsTable* t) {
  t->rms_norm = rms_norm;
  t->softmax_scaled = softmax_scaled;
  t->swiglu = swiglu;
  t->swiglu_oai = swiglu_oai;
  t->swiglu_clamped = swiglu_clamped;
  t->vec_add = vec_add;
  t->vec_add_scaled = vec_add_scaled;
  t->vec_add_scaled_rows = vec_add_scaled_rows;
  t->exp = exp;
  t->exp_shift_sum = exp_shift_sum;
  fill_kv_row_ops(t);
}

}  // namespace strata::x86::avx512
