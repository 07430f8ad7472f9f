#include "kernels/linear.h"

#include <algorithm>

#include "base/assert.h"
#include "kernels/activation_tap.h"
#include "kernels/ops.h"
#include "kernels/matmul.h"
#include "kernels/traits.h"

namespace strata {

size_t linear_scratch_bytes(GgmlType t, int64_t in, int64_t n) {
  const KernelTraits& kt = kernel_traits(t);
  if (kt.vec_dot_type == GgmlType::f32) return 0;
  return row_bytes(kt.vec_dot_type, in) * static_cast<size_t>(n) + 64;
}

namespace {

// Rows [r0, r1) of w against n activation rows (xq, xrow bytes apart, in w's vec_dot_type; f32
// rows for f32 weights), + bias: y[t][r].
void linear_rows(const KernelTraits& kt, const TensorView& w, const void* xq, size_t xrow, int64_t n,
                 float* y, const float* bias, int64_t r0, int64_t r1) {
  const int64_t in = w.ne[0], out = w.ne[1];
  if (w.type == GgmlType::f32) {
    const auto* wd = static_cast<const uint8_t*>(w.data);
    const auto* xf = static_cast<const float*>(xq);
    for (int64_t r = r0; r < r1; ++r) {
      const float* wr = reinterpret_cast<const float*>(wd + r * w.nb[1]);
      const float b = bias ? bias[r] : 0.0f;
      for (int64_t t = 0; t < n; ++t) y[t * out + r] = dot_f32(wr, xf + t * in, in) + b;
    }
    return;
  }
  matmul_rows(kt, in, w.data, w.nb[1], r0, r1, xq, xrow, n, y, out);
  if (bias) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = r0; r < r1; ++r) y[t * out + r] += bias[r];
  }
}

}  // namespace

LinearPlan::LinearPlan(Arena& arena, const LinearOut* outs, int n_outs, const float* x, int64_t n,
                       int64_t tail_blocks)
    : outs_(outs), n_outs_(n_outs), x_(x), n_(n), in_(outs[0].w->ne[0]) {
  STRATA_ASSERT(n_outs >= 1 && n_outs <= kMaxOuts && n >= 0);
  first_item_[0] = 0;
  for (int i = 0; i < n_outs; ++i) {
    const TensorView& w = *outs[i].w;
    STRATA_ASSERT(w.ne[0] == in_ && w.ne[2] == 1 && w.ne[3] == 1);
    const KernelTraits& kt = kernel_traits(w.type);
    STRATA_ASSERT_MSG(kt.can_matmul(),
                      "linear: weight type without vec_dot (binding should have refused it)");
    // Activations converted once per vec_dot_type (like ggml's wdata).
    const GgmlType vt = kt.vec_dot_type;
    int same = -1;
    for (int j = 0; j < i && same < 0; ++j)
      if (kernel_traits(outs[j].w->type).vec_dot_type == vt) same = j;
    buf_[i] = nullptr;
    if (same >= 0) {
      xq_[i] = xq_[same];
      xrow_[i] = xrow_[same];
    } else if (vt == GgmlType::f32) {
      xq_[i] = x;
      xrow_[i] = in_ * sizeof(float);
    } else {
      STRATA_ASSERT(kernel_traits(vt).from_float != nullptr);
      xrow_[i] = row_bytes(vt, in_);
      buf_[i] = arena.alloc<uint8_t>(xrow_[i] * static_cast<size_t>(n));
      xq_[i] = buf_[i];
    }
    const int64_t blocks = (w.ne[1] + kLinearRowsPerItem - 1) / kLinearRowsPerItem;
    pairs_[i] = std::max<int64_t>(0, blocks - (i == n_outs - 1 ? tail_blocks : 0)) / 2;
    first_item_[i + 1] = first_item_[i] + blocks - pairs_[i];
    work_ += n * in_ * w.ne[1];
  }
}

void LinearPlan::convert(int64_t t0, int64_t t1) const {
  if (ActivationTap* tap = activation_tap()) {
    for (int i = 0; i < n_outs_; ++i) tap->on_linear(*outs_[i].w, x_ + t0 * in_, t1 - t0);
  }
  for (int i = 0; i < n_outs_; ++i) {
    if (buf_[i] == nullptr) continue;
    const KernelTraits& vk = kernel_traits(kernel_traits(outs_[i].w->type).vec_dot_type);
    for (int64_t t = t0; t < t1; ++t) vk.from_float(x_ + t * in_, buf_[i] + t * xrow_[i], in_);
  }
}

void LinearPlan::run(int64_t item) const {
  int i = 0;
  while (item >= first_item_[i + 1]) ++i;
  const TensorView& w = *outs_[i].w;
  const int64_t k = item - first_item_[i];
  const int64_t b0 = k < pairs_[i] ? 2 * k : k + pairs_[i], b1 = k < pairs_[i] ? b0 + 2 : b0 + 1;
  linear_rows(kernel_traits(w.type), w, xq_[i], xrow_[i], n_, outs_[i].y, outs_[i].bias,
              b0 * kLinearRowsPerItem, std::min(w.ne[1], b1 * kLinearRowsPerItem));
}

void linear_multi(ThreadPool& pool, Arena& arena, const LinearOut* outs, int n_outs, const float* x,
                  int64_t n) {
  if (n <= 0) return;
  const LinearPlan p(arena, outs, n_outs, x, n, 2 * int64_t{pool.size()});
  p.convert(0, n);
  const bool par = pool.size() > 1 && p.work() >= kMinParallelWork && p.items() >= 2;
  parallel_items(pool, p.items(), par, [&](int64_t item, int) { p.run(item); });
}

void linear(ThreadPool& pool, Arena& arena, const TensorView& w, const float* x, int64_t n, float* y,
            const float* bias) {
  const LinearOut o{&w, y, bias};
  const size_t m = arena.mark();
  linear_multi(pool, arena, &o, 1, x, n);
  arena.rewind(m);
}

void embedding_row(const TensorView& table, int64_t id, float* out) {
  STRATA_ASSERT(id >= 0 && id < table.ne[1]);
  const KernelTraits& kt = kernel_traits(table.type);
  STRATA_ASSERT(kt.to_float != nullptr);
  kt.to_float(table.row(id), out, table.ne[0]);
}

}  // namespace strata
