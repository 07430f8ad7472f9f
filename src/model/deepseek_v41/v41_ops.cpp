// The V4.1 forward's primitives in either numerics (v41_step.h): the oracle's reference-order
// functions (v41_quant.h, v41_rope.h) or strata's own kernels (kernels/linear.h, kernels/ops.h,
// deepseek4's RoPE parameters).
#include "kernels/linear.h"
#include "model/deepseek4/ds4_rope.h"
#include "model/deepseek_v41/v41_quant.h"
#include "model/deepseek_v41/v41_step.h"

namespace strata::v41 {

void lin_fast(Step& s, const TensorView& w, const float* X, int64_t n, float* Y, bool round_bf16) {
  Arena& a = s.sc.arena;
  const size_t mark = a.mark();
  linear(s.pool, a, w, X, n, Y);
  a.rewind(mark);
  if (round_bf16)
    for (int64_t i = 0; i < n * w.ne[1]; ++i) Y[i] = bf16r(Y[i]);
}

void lin(Step& s, const Mat& W, const float* X, int64_t n, float* Y, const int64_t* s_ref) {
  if (n == 0) return;
  if (!s.fast()) {
    if (s_ref)
      linear_f32_rows(s.pool, W.w.data(), W.rows, W.cols, X, W.cols, n, s_ref, Y, W.rows);
    else
      linear_bf16_rows(s.pool, W.w.data(), W.rows, W.cols, X, W.cols, n, Y, W.rows);
    return;
  }
  lin_fast(s, W.tv, X, n, Y, s_ref == nullptr);
}

void norm_bf16(const Step& s, const float* x, const float* w, int64_t n, float eps, float* y) {
  if (!s.fast()) {
    rms_norm_bf16(x, w, n, eps, y);
    return;
  }
  rms_norm(x, w, y, n, eps);
  for (int64_t i = 0; i < n; ++i) y[i] = bf16r(y[i]);
}

void rope_bf16(const Step& s, bool comp, float* x, int64_t n_rows, int64_t row_len, int64_t pos,
               bool inverse) {
  if (!s.fast()) {
    (comp ? s.m.rope_comp : s.m.rope_plain).apply(x, n_rows, row_len, pos, inverse);
    return;
  }
  const RopeParams& p = comp ? s.m.fast_rope_comp : s.m.fast_rope_plain;
  ds4::rope_rows(p, pos, x, n_rows, row_len, inverse);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* v = x + r * row_len + (row_len - p.n_rot);
    for (int i = 0; i < p.n_rot; ++i) v[i] = bf16r(v[i]);
  }
}

}  // namespace strata::v41
