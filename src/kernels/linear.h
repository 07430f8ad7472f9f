// Linear layers and embedding rows over weight views of any supported type.
//
// linear() follows ggml-cpu's MUL_MAT numerics: a quantized weight's activation rows are first
// quantized to the weight type's vec_dot_type (Q8_0 for Q4_0 / Q8_0 / MXFP4, Q8_K for K-quants),
// then each output is one vec_dot of a weight row with an activation row. f32 weights use f32
// activations directly. Work is split across the pool by output rows.
#pragma once

#include <cstdint>

#include "base/arena.h"
#include "base/parallel.h"
#include "base/thread_pool.h"
#include "format/tensor_view.h"

namespace strata {

// y[n][out] = x[n][in] · Wᵀ (+ bias[out] when non-null). W: {in, out} (row-major [out][in]).
// x rows have stride `in`, y rows stride `out`. Uses `arena` for quantized activations.
void linear(ThreadPool& pool, Arena& arena, const TensorView& w, const float* x, int64_t n, float* y,
            const float* bias = nullptr);

// Several linear layers over the same input x [n][in] in one pool region (q/k/v): x is
// converted once per distinct vec_dot_type, work items are blocks of rows of any of the
// weights. Each y equals what linear() gives, bit for bit.
struct LinearOut {
  const TensorView* w = nullptr;  // {in, out}
  float* y = nullptr;             // [n][out]
  const float* bias = nullptr;    // optional [out]
};
void linear_multi(ThreadPool& pool, Arena& arena, const LinearOut* outs, int n_outs, const float* x,
                  int64_t n);

// linear_multi taken apart, for blocks that run its row items inside a larger pool region
// (attention: q/k/v, then RoPE and attention, then the output projection in one region):
//   LinearPlan p(arena, outs, n_outs, x, n, tail);  // buffers and items; nothing computed yet
//   p.convert(t0, t1);                                // x rows [t0, t1) into each vec_dot_type
//   p.run(item) for item in [0, p.items())            // once the rows it reads are converted
// Rows go in blocks of kLinearRowsPerItem; an item is two blocks (half the per-call activation
// setup of the decode gemv kernels), except the last `tail_blocks` blocks of the last output,
// one block each, so a region that ends on these items ends on small ones. run() gives what
// linear() gives, whatever the items (every row is the same per-row arithmetic).
constexpr int64_t kLinearRowsPerItem = 64;
class LinearPlan {
 public:
  static constexpr int kMaxOuts = 8;
  LinearPlan(Arena& arena, const LinearOut* outs, int n_outs, const float* x, int64_t n,
             int64_t tail_blocks = 0);
  int64_t items() const { return first_item_[n_outs_]; }
  // ≈ multiply-adds of all items (the parallel threshold).
  int64_t work() const { return work_; }
  // The item computing row r of output i.
  int64_t item_of(int i, int64_t r) const {
    const int64_t b = r / kLinearRowsPerItem;
    return first_item_[i] + (b < 2 * pairs_[i] ? b / 2 : b - pairs_[i]);
  }
  void convert(int64_t t0, int64_t t1) const;
  void run(int64_t item) const;

 private:
  const LinearOut* outs_;
  int n_outs_;
  const float* x_;
  int64_t n_, in_;
  const void* xq_[kMaxOuts];
  uint8_t* buf_[kMaxOuts];  // conversion target, or null (f32, or shared with an earlier output)
  size_t xrow_[kMaxOuts];
  int64_t first_item_[kMaxOuts + 1];
  int64_t pairs_[kMaxOuts];  // two-block items of each output (its first 2·pairs blocks)
  int64_t work_ = 0;
};

// out[ne0] = row `id` of a 2-D table (token embeddings), dequantized exactly.
void embedding_row(const TensorView& table, int64_t id, float* out);

// Bytes linear() takes from the arena for n rows of width `in` with weight type t.
size_t linear_scratch_bytes(GgmlType t, int64_t in, int64_t n);

}  // namespace strata
