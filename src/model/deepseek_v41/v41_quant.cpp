#include "model/deepseek_v41/v41_quant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>
#include <limits>

namespace strata::v41 {

namespace {
float block_amax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}
}  // namespace

void fake_quant_fp8(float* x, int64_t n, int block) {
  for (int64_t b = 0; b + block <= n; b += block) {
    float* v = x + b;
    const float s = ue8m0_ceil(std::max(block_amax(v, block), 1e-4f) * (1.0f / 448.0f));
    for (int i = 0; i < block; ++i) v[i] = bf16r(e4m3_round(std::clamp(v[i] / s, -448.0f, 448.0f)) * s);
  }
}

void fake_quant_fp4(float* x, int64_t n, int block) {
  const float floor = 6.0f * std::ldexp(1.0f, -126);
  for (int64_t b = 0; b + block <= n; b += block) {
    float* v = x + b;
    const float s = ue8m0_ceil(std::max(block_amax(v, block), floor) * (1.0f / 6.0f));
    for (int i = 0; i < block; ++i) v[i] = bf16r(e2m1_round(std::clamp(v[i] / s, -6.0f, 6.0f)) * s);
  }
}

void fake_quant_fp4_e4m3(float* x, int64_t n, int block) {
  for (int64_t b = 0; b + block <= n; b += block) {
    float* v = x + b;
    const float s = ue4m3_round(std::clamp(block_amax(v, block) * (1.0f / 6.0f), 1.0f / 512.0f, 448.0f));
    for (int i = 0; i < block; ++i) v[i] = bf16r(e2m1_round(std::clamp(v[i] / s, -6.0f, 6.0f)) * s);
  }
}

namespace {

// One lane of an FMA accumulation: acc <- fma(w[i], x[i], acc) for i in [b, e) step `step`.
float fma_run(const float* w, const float* x, int64_t b, int64_t e, int64_t step) {
  float acc = 0.0f;
  for (int64_t i = b; i < e; i += step) acc = std::fma(w[i], x[i], acc);
  return acc;
}

}  // namespace

float torch_vec_expf(float x) {
  constexpr float kInvLn2 = 1.44269504088896340736f;
  constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.428606765330187045e-06f;
  const float q = std::nearbyint(x * kInvLn2);
  float s = std::fma(q, -kLn2Hi, x);
  s = std::fma(q, -kLn2Lo, s);
  float u = 0.000198527617612853646278381f;
  u = std::fma(u, s, 0.00139304355252534151077271f);
  u = std::fma(u, s, 0.00833336077630519866943359f);
  u = std::fma(u, s, 0.0416664853692054748535156f);
  u = std::fma(u, s, 0.166666671633720397949219f);
  u = std::fma(u, s, 0.5f);
  u = 1.0f + std::fma(s * s, u, s);
  const int qi = static_cast<int>(q), half = qi >> 1;  // 2^q in two steps: no overflow near the ends
  u = u * std::ldexp(1.0f, half) * std::ldexp(1.0f, qi - half);
  if (x < -104.0f) return 0.0f;
  if (x > 100.0f) return std::numeric_limits<float>::infinity();
  return u;
}

bool f32_gemm_small(int64_t n_out, int64_t n_in, int64_t s_ref) {
  const double mnk = static_cast<double>(n_out) * static_cast<double>(s_ref) * static_cast<double>(n_in);
  return n_in >= 32 && n_out * s_ref <= 1200 && mnk <= 1e6;
}

float dot_f32_blas(const float* a, const float* b, int64_t n, bool small) {
  if (small) {
    float lane[16];
    for (int l = 0; l < 16; ++l) lane[l] = fma_run(a, b, l, n, 16);
    float blk[4];
    for (int g = 0; g < 4; ++g)
      blk[g] = (lane[4 * g] + lane[4 * g + 1]) + (lane[4 * g + 2] + lane[4 * g + 3]);
    return (blk[0] + blk[1]) + (blk[2] + blk[3]);
  }
  float c = 0.0f;
  for (int64_t k0 = 0; k0 < n;) {
    int64_t len = n - k0;
    if (len >= 2 * kF32GemmQ) {
      len = kF32GemmQ;
    } else if (len > kF32GemmQ) {
      len = (len / 2 + 15) / 16 * 16;
    }
    const float part = fma_run(a, b, k0, k0 + len, 1);
    c = k0 == 0 ? part : c + part;
    k0 += len;
  }
  return c;
}

void linear_f32(const float* W, const float* x, int64_t n_out, int64_t n_in, int64_t s_ref, float* y) {
  const bool small = f32_gemm_small(n_out, n_in, s_ref);
  for (int64_t o = 0; o < n_out; ++o) y[o] = dot_f32_blas(W + o * n_in, x, n_in, small);
}

namespace {

// One bf16 Linear output: one f32 accumulator, per input pair (2k, 2k+1) the odd product first,
// then the even (one VDPBF16PS lane), then one rounding.
float dot_bf16(const float* w, const float* x, int64_t n_in) {
  float acc = 0.0f;
  int64_t i = 0;
  for (; i + 1 < n_in; i += 2) {
    acc = std::fma(w[i + 1], x[i + 1], acc);
    acc = std::fma(w[i], x[i], acc);
  }
  if (i < n_in) acc = std::fma(w[i], x[i], acc);
  return bf16r(acc);
}

}  // namespace

void linear_bf16(const float* W, const float* x, int64_t n_out, int64_t n_in, float* y) {
  for (int64_t o = 0; o < n_out; ++o) y[o] = dot_bf16(W + o * n_in, x, n_in);
}

// Weight row outer, batch rows inner: the row stays in L1 while every batch row uses it. (Blocking
// rows into independent accumulator chains measured slower: without -mfma each std::fma is a libm
// call, which spills the chains.)
void linear_bf16_rows(ThreadPool& pool, const float* W, int64_t n_out, int64_t n_in, const float* X,
                      int64_t ldx, int64_t n_rows, float* Y, int64_t ldy) {
  pool.parallel_for(n_out, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t r = 0; r < n_rows; ++r) Y[r * ldy + o] = dot_bf16(W + o * n_in, X + r * ldx, n_in);
  });
}

void linear_f32_rows(ThreadPool& pool, const float* W, int64_t n_out, int64_t n_in, const float* X,
                     int64_t ldx, int64_t n_rows, const int64_t* s_ref, float* Y, int64_t ldy) {
  pool.parallel_for(n_out, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t r = 0; r < n_rows; ++r)
        Y[r * ldy + o] = dot_f32_blas(W + o * n_in, X + r * ldx, n_in, f32_gemm_small(n_out, n_in, s_ref[r]));
  });
}

float torch_sum_f32(const float* x, int64_t n) {
  constexpr int kLanes = 8, kIlp = 4, kLevels = 4;
  using V = std::array<float, kLanes>;
  auto add = [](V& a, const V& b) {
    for (int l = 0; l < kLanes; ++l) a[l] += b[l];
  };
  auto load = [&](int64_t v) {
    V r;
    for (int l = 0; l < kLanes; ++l) r[l] = x[v * kLanes + l];
    return r;
  };
  if (n < kLanes) {  // not vectorized: one running sum
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    return s;
  }
  const int64_t n_vec = n / kLanes, rows = n_vec / kIlp;
  // Cascade over rows of kIlp vectors: level 0 sums `step` rows, then is folded into level 1, ...
  int64_t log2_rows = 0;
  while ((int64_t{1} << log2_rows) < rows) ++log2_rows;
  const int64_t power = std::max<int64_t>(4, log2_rows / kLevels), step = int64_t{1} << power;
  const int64_t mask = step - 1;
  V acc[kLevels][kIlp] = {};
  int64_t i = 0;
  while (i + step <= rows) {
    for (int64_t j = 0; j < step; ++j, ++i)
      for (int k = 0; k < kIlp; ++k) add(acc[0][k], load(i * kIlp + k));
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < kIlp; ++k) {
        add(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = V{};
      }
      if ((i & (mask << (j * power))) != 0) break;
    }
  }
  for (; i < rows; ++i)
    for (int k = 0; k < kIlp; ++k) add(acc[0][k], load(i * kIlp + k));
  for (int j = 1; j < kLevels; ++j)
    for (int k = 0; k < kIlp; ++k) add(acc[0][k], acc[j][k]);
  V part = acc[0][0];
  for (int64_t v = rows * kIlp; v < n_vec; ++v) add(part, load(v));
  for (int k = 1; k < kIlp; ++k) add(part, acc[0][k]);
  float s = 0.0f;
  for (int64_t e = n_vec * kLanes; e < n; ++e) s += x[e];
  for (int l = 0; l < kLanes; ++l) s += part[l];
  return s;
}

float torch_mean_sq_f32(const float* x, int64_t n) {
  // The squares materialised as torch does (x.square()), in a buffer reused across calls.
  thread_local std::vector<float> sq;
  sq.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) sq[static_cast<size_t>(i)] = x[i] * x[i];
  return torch_sum_f32(sq.data(), n) / static_cast<float>(n);
}

void rms_norm_bf16(const float* x, const float* w, int64_t n, float eps, float* y) {
  const float r = 1.0f / std::sqrt(torch_mean_sq_f32(x, n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = bf16r(w ? w[i] * (x[i] * r) : x[i] * r);
}

}  // namespace strata::v41
