#include "model/linear.h"

#include "base/assert.h"
#include "kernels/ops.h"
#include "kernels/matmul.h"
#include "kernels/traits.h"

namespace strata {

size_t linear_scratch_bytes(GgmlType t, int64_t in, int64_t n) {
  const KernelTraits& kt = kernel_traits(t);
  if (kt.vec_dot_type == GgmlType::f32) return 0;
  return row_bytes(kt.vec_dot_type, in) * static_cast<size_t>(n) + 64;
}

void linear(ThreadPool& pool, Arena& arena, const TensorView& w, const float* x, int64_t n, float* y,
            const float* bias) {
  const int64_t in = w.ne[0], out = w.ne[1];
  STRATA_ASSERT(w.ne[2] == 1 && w.ne[3] == 1);
  if (n <= 0) return;
  const KernelTraits& kt = kernel_traits(w.type);
  STRATA_ASSERT_MSG(kt.can_matmul(), "linear: weight type without vec_dot (binding should have refused it)");

  if (w.type == GgmlType::f32) {
    const auto* wd = static_cast<const uint8_t*>(w.data);
    parallel_rows(pool, out, n * in * out, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* wr = reinterpret_cast<const float*>(wd + r * w.nb[1]);
        const float b = bias ? bias[r] : 0.0f;
        for (int64_t t = 0; t < n; ++t) y[t * out + r] = dot_f32(wr, x + t * in, in) + b;
      }
    });
    return;
  }

  // Quantize the activation rows once (like ggml's wdata).
  const void* xq = x;
  size_t xrow = in * sizeof(float);
  if (kt.vec_dot_type != GgmlType::f32) {
    const KernelTraits& vt = kernel_traits(kt.vec_dot_type);
    STRATA_ASSERT(vt.from_float != nullptr);
    xrow = row_bytes(kt.vec_dot_type, in);
    auto* buf = arena.alloc<uint8_t>(xrow * n);
    for (int64_t t = 0; t < n; ++t) vt.from_float(x + t * in, buf + t * xrow, in);
    xq = buf;
  }
  // kernels/matmul's row core: register tiles (cache-blocked) where the type has them, else one
  // vec_dot per output; rows handed out dynamically when the product is worth the pool.
  if (pool.size() > 1 && n * in * out >= kMinParallelWork && out >= 2) {
    matmul_rows_parallel(pool, kt, in, w.data, w.nb[1], out, xq, xrow, n, y, out);
  } else {
    matmul_rows(kt, in, w.data, w.nb[1], 0, out, xq, xrow, n, y, out);
  }
  if (bias) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < out; ++r) y[t * out + r] += bias[r];
  }
}

void embedding_row(const TensorView& table, int64_t id, float* out) {
  STRATA_ASSERT(id >= 0 && id < table.ne[1]);
  const KernelTraits& kt = kernel_traits(table.type);
  STRATA_ASSERT(kt.to_float != nullptr);
  kt.to_float(table.row(id), out, table.ne[0]);
}

}  // namespace strata
