// AVX2 + FMA element-wise ops (kernels/ops.h OpsTable): 8 lanes, scalar tails. Compiled with
// -ffp-contract=off (src/CMakeLists.txt) so that a written multiply-then-add stays two roundings,
// as in the scalar reference: vec_add, vec_add_scaled and dot_f32 are bit-identical to it.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"

namespace strata::x86::avx2 {
namespace {

// e^x, 8 lanes, within 2 ulp of std::exp (tests/kernels/ops_simd_test.cpp). x = n·ln2 + r with
// |r| <= ln2/2 (Cody-Waite, the ln2 split applied by FMA), e^r by its degree-7 Taylor polynomial
// (truncation < 0.05 ulp), times 2^n as two exact power-of-two factors so that a subnormal result
// is rounded once and n = 128 overflows to inf. Inputs above 89 are clamped to it (+inf); inputs
// below -104 (e^x rounds to +0: softmax masks' -inf) give +0 without computing, so that they never
// take the slow path of an underflowing multiply. NaN lanes return their input.
__m256 exp_f32x8(__m256 x) {
  const __m256 zero_out = _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ);
  const __m256 xc = _mm256_andnot_ps(zero_out, _mm256_min_ps(_mm256_set1_ps(89.0f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693147182464599609375f), xc);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(1.904654323148236e-9f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);  // [-150, 128]
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 e = _mm256_andnot_ps(zero_out, _mm256_mul_ps(_mm256_mul_ps(p, s1), s2));
  return _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// acc += the 8 lanes of v widened to double (lanes 0-3, then 4-7).
__m256d widen_sum(__m256d acc, __m256 v) {
  acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

double hsum_f64x4(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = widen_sum(a0, _mm256_mul_ps(v0, v0));
    a1 = widen_sum(a1, _mm256_mul_ps(v1, v1));
  }
  double sum = hsum_f64x4(_mm256_add_pd(a0, a1));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  const __m256 sv = _mm256_set1_ps(scale);
  i = 0;
  if (w) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i,
                       _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv), _mm256_loadu_ps(w + i)));
    for (; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sv));
    for (; i < n; ++i) y[i] = x[i] * scale;
  }
}

void softmax_scaled(float* x, int64_t n, float scale, const float* mask, const float* sink) {
  const __m256 sv = _mm256_set1_ps(scale);
  __m256 mv = _mm256_set1_ps(kNegInf);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), sv);
    if (mask) v = _mm256_add_ps(v, _mm256_loadu_ps(mask + i));
    _mm256_storeu_ps(x + i, v);
    mv = _mm256_max_ps(mv, v);
  }
  float mx = hmax_f32x8(mv);
  for (; i < n; ++i) {
    float v = x[i] * scale;
    if (mask) v += mask[i];
    x[i] = v;
    mx = std::max(mx, v);
  }
  if (sink) mx = std::max(mx, *sink);
  const __m256 mxv = _mm256_set1_ps(mx), ninf = _mm256_set1_ps(kNegInf);
  __m256d acc = _mm256_setzero_pd();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = _mm256_andnot_ps(_mm256_cmp_ps(v, ninf, _CMP_EQ_OQ), exp_f32x8(_mm256_sub_ps(v, mxv)));
    _mm256_storeu_ps(x + i, e);
    acc = widen_sum(acc, e);
  }
  double sum = hsum_f64x4(acc);
  for (; i < n; ++i) {
    const float e = x[i] == kNegInf ? 0.0f : expf(x[i] - mx);
    x[i] = e;
    sum += static_cast<double>(e);
  }
  if (sink) sum += static_cast<double>(expf(*sink - mx));
  const float inv = static_cast<float>(1.0 / sum);
  const __m256 iv = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
  for (; i < n; ++i) x[i] *= inv;
}

// g / (1 + e^-g): the scalar silu's arithmetic with the vector exp.
__m256 silu_f32x8(__m256 g) {
  const __m256 neg = _mm256_xor_ps(g, _mm256_set1_ps(-0.0f));
  return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), exp_f32x8(neg)));
}

void swiglu(const float* g, const float* u, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu_f32x8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
  for (; i < n; ++i) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void swiglu_oai(const float* g, const float* u, float* out, int64_t n, float alpha, float limit) {
  const __m256 lim = _mm256_set1_ps(limit), nlim = _mm256_set1_ps(-limit), av = _mm256_set1_ps(alpha);
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_min_ps(lim, _mm256_loadu_ps(g + i));  // NaN kept, as std::min(g, limit)
    const __m256 y = _mm256_min_ps(lim, _mm256_max_ps(nlim, _mm256_loadu_ps(u + i)));
    const __m256 e = exp_f32x8(_mm256_mul_ps(av, _mm256_xor_ps(x, sign)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_add_ps(y, one)));
  }
  for (; i < n; ++i) {
    const float x = std::min(g[i], limit);
    const float y = std::min(std::max(u[i], -limit), limit);
    out[i] = x / (1.0f + expf(alpha * (-x))) * (y + 1.0f);
  }
}

void swiglu_clamped(const float* g, const float* u, float* out, int64_t n, float limit) {
  const __m256 lim = _mm256_set1_ps(limit), nlim = _mm256_set1_ps(-limit);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_min_ps(lim, _mm256_loadu_ps(g + i));
    const __m256 y = _mm256_min_ps(lim, _mm256_max_ps(nlim, _mm256_loadu_ps(u + i)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu_f32x8(x), y));
  }
  for (; i < n; ++i) {
    const float x = std::min(g[i], limit);
    const float y = std::min(std::max(u[i], -limit), limit);
    out[i] = x / (1.0f + expf(-x)) * y;
  }
}

void vec_add(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i));
    const __m256 b = _mm256_add_ps(_mm256_loadu_ps(y + i + 8), _mm256_loadu_ps(x + i + 8));
    _mm256_storeu_ps(y + i, a);
    _mm256_storeu_ps(y + i + 8, b);
  }
  for (; i < n; ++i) y[i] += x[i];
}

void vec_add_scaled(float* y, const float* x, float s, int64_t n) {
  const __m256 sv = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(sv, _mm256_loadu_ps(x + i)));
    const __m256 b = _mm256_add_ps(_mm256_loadu_ps(y + i + 8), _mm256_mul_ps(sv, _mm256_loadu_ps(x + i + 8)));
    _mm256_storeu_ps(y + i, a);
    _mm256_storeu_ps(y + i + 8, b);
  }
  for (; i < n; ++i) y[i] += s * x[i];
}

// The scalar reference's 8 lanes (acc[j] += a[i+j]·b[i+j]) in one register, then its double
// reduction in the same order.
float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  // 0 + lane 0 + lane 1 + ... + lane 7 in double, from registers (a store and eight reloads
  // stalled store forwarding).
  __m128d sum2 = _mm_setzero_pd();
  for (const __m128 half : {_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)}) {
    const __m256d d = _mm256_cvtps_pd(half);
    const __m128d d01 = _mm256_castpd256_pd128(d), d23 = _mm256_extractf128_pd(d, 1);
    sum2 = _mm_add_sd(sum2, d01);
    sum2 = _mm_add_sd(sum2, _mm_unpackhi_pd(d01, d01));
    sum2 = _mm_add_sd(sum2, d23);
    sum2 = _mm_add_sd(sum2, _mm_unpackhi_pd(d23, d23));
  }
  double sum = _mm_cvtsd_f64(sum2);
  for (; i < n; ++i) sum += static_cast<double>(a[i] * b[i]);
  return static_cast<float>(sum);
}

// Four keys at a time: each key's 8 lanes as in dot_f32, then the four double reductions side by
// side (lane j of the four keys in one register, added in the reference's order j = 0..7).
void dot_f32_rows(const float* q, const float* const* k, int64_t nk, int64_t n, float* out) {
  int64_t j = 0;
  const int64_t n8 = n / 8 * 8;
  for (; j + 4 <= nk; j += 4) {
    const float *k0 = k[j], *k1 = k[j + 1], *k2 = k[j + 2], *k3 = k[j + 3];
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n8; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      a0 = _mm256_add_ps(a0, _mm256_mul_ps(qv, _mm256_loadu_ps(k0 + i)));
      a1 = _mm256_add_ps(a1, _mm256_mul_ps(qv, _mm256_loadu_ps(k1 + i)));
      a2 = _mm256_add_ps(a2, _mm256_mul_ps(qv, _mm256_loadu_ps(k2 + i)));
      a3 = _mm256_add_ps(a3, _mm256_mul_ps(qv, _mm256_loadu_ps(k3 + i)));
    }
    // 4×8 transpose: u[c] holds lanes c (low half) and c + 4 (high half) of keys 0..3.
    const __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1);
    const __m256 t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3);
    const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xee),
                         _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xee)};
    __m256d sum = _mm256_setzero_pd();
    for (int c = 0; c < 4; ++c) sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_castps256_ps128(u[c])));
    for (int c = 0; c < 4; ++c) sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_extractf128_ps(u[c], 1)));
    if (n8 < n) {
      alignas(32) double d[4];
      _mm256_store_pd(d, sum);
      for (int64_t i = n8; i < n; ++i) {
        d[0] += static_cast<double>(q[i] * k0[i]);
        d[1] += static_cast<double>(q[i] * k1[i]);
        d[2] += static_cast<double>(q[i] * k2[i]);
        d[3] += static_cast<double>(q[i] * k3[i]);
      }
      sum = _mm256_load_pd(d);
    }
    _mm_storeu_ps(out + j, _mm256_cvtpd_ps(sum));
  }
  for (; j < nk; ++j) out[j] = dot_f32(q, k[j], n);
}

// 32 outputs stay in registers across all keys; each key adds s·x with two roundings, in key
// order, as nk calls of vec_add_scaled would.
void vec_add_scaled_rows(float* y, const float* const* x, const float* s, int64_t nk, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
    __m256 y2 = _mm256_loadu_ps(y + i + 16), y3 = _mm256_loadu_ps(y + i + 24);
    for (int64_t j = 0; j < nk; ++j) {
      const __m256 sv = _mm256_set1_ps(s[j]);
      const float* xj = x[j] + i;
      y0 = _mm256_add_ps(y0, _mm256_mul_ps(sv, _mm256_loadu_ps(xj)));
      y1 = _mm256_add_ps(y1, _mm256_mul_ps(sv, _mm256_loadu_ps(xj + 8)));
      y2 = _mm256_add_ps(y2, _mm256_mul_ps(sv, _mm256_loadu_ps(xj + 16)));
      y3 = _mm256_add_ps(y3, _mm256_mul_ps(sv, _mm256_loadu_ps(xj + 24)));
    }
    _mm256_storeu_ps(y + i, y0);
    _mm256_storeu_ps(y + i + 8, y1);
    _mm256_storeu_ps(y + i + 16, y2);
    _mm256_storeu_ps(y + i + 24, y3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 y0 = _mm256_loadu_ps(y + i);
    for (int64_t j = 0; j < nk; ++j)
      y0 = _mm256_add_ps(y0, _mm256_mul_ps(_mm256_set1_ps(s[j]), _mm256_loadu_ps(x[j] + i)));
    _mm256_storeu_ps(y + i, y0);
  }
  for (; i < n; ++i)
    for (int64_t j = 0; j < nk; ++j) y[i] += s[j] * x[j][i];
}

// The scalar rotation's products and sums, 8 lanes at a time (bit-identical): neox rotates
// (i, i + half) with the cache's cos/sin pairs split into two registers; norm rotates adjacent
// pairs, cos and sin duplicated across each pair and the pair swapped for the cross term.
void rope_apply(RopeStyle style, int n_rot, const float* cache, float* x) {
  const int half = n_rot / 2;
  int i = 0;
  if (style == RopeStyle::rope_style_neox) {
    for (; i + 8 <= half; i += 8) {
      const __m256 lo = _mm256_loadu_ps(cache + 2 * i), hi = _mm256_loadu_ps(cache + 2 * i + 8);
      const __m256 c = _mm256_castpd_ps(
          _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), 0xd8));
      const __m256 s = _mm256_castpd_ps(
          _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), 0xd8));
      const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + half);
      _mm256_storeu_ps(x + i, _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)));
      _mm256_storeu_ps(x + i + half, _mm256_add_ps(_mm256_mul_ps(a, s), _mm256_mul_ps(b, c)));
    }
    for (; i < half; ++i) {
      const float c = cache[2 * i], s = cache[2 * i + 1], x0 = x[i], x1 = x[i + half];
      x[i] = x0 * c - x1 * s;
      x[i + half] = x0 * s + x1 * c;
    }
    return;
  }
  for (; i + 4 <= half; i += 4) {  // 4 pairs
    const __m256 v = _mm256_loadu_ps(x + 2 * i), cs = _mm256_loadu_ps(cache + 2 * i);
    const __m256 p = _mm256_mul_ps(v, _mm256_moveldup_ps(cs));                           // x0·c, x1·c
    const __m256 q = _mm256_mul_ps(_mm256_permute_ps(v, 0xb1), _mm256_movehdup_ps(cs));  // x1·s, x0·s
    _mm256_storeu_ps(x + 2 * i, _mm256_addsub_ps(p, q));  // x0·c − x1·s, x1·c + x0·s
  }
  for (; i < half; ++i) {
    const float c = cache[2 * i], s = cache[2 * i + 1], x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * c - x1 * s;
    x[2 * i + 1] = x0 * s + x1 * c;
  }
}

void exp(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp_f32x8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = expf(x[i]);
}

float exp_shift_sum(float* x, int64_t n, float shift) {
  const __m256 sv = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_f32x8(_mm256_sub_ps(_mm256_loadu_ps(x + i), sv));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum_f32x8(acc);
  for (; i < n; ++i) {
    x[i] = expf(x[i] - shift);
    sum += x[i];
  }
  return sum;
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
  t->dot_f32 = dot_f32;
  t->dot_f32_rows = dot_f32_rows;
  t->vec_add_scaled_rows = vec_add_scaled_rows;
  t->rope_apply = rope_apply;
  t->exp = exp;
  t->exp_shift_sum = exp_shift_sum;
  fill_kv_row_ops(t);
}

}  // namespace strata::x86::avx2
