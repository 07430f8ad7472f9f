// Matrix products of quantized weights with f32 activations, as ggml-cpu computes MUL_MAT and
// MUL_MAT_ID: the activation rows are first converted to the weight type's vec_dot_type
// (Q8_0 for Q4_0/Q8_0/MXFP4, Q8_K for K-quants, f16/bf16 for those, f32 as is), then every
// output is one vec_dot of a weight row with an activation row (kernels/traits.h).
//
// Shapes (ggml order: ne0 is the contiguous reduction dimension):
//   W  TensorView {in, out} (2-D, or one expert via TensorView::slice2d(e)), any supported type
//   x  [n_tokens][in] f32, rows contiguous
//   y  [n_tokens][ldy] f32, y[t][r] = W_row_r · x[t] for r < out (ldy defaults to out)
//
// Two steps so one conversion serves several weights that share an input (gate and up):
//   QuantizedActs qa;                                  // keep per engine: its buffer is reused
//   STRATA_TRY(quantize_activations(kernel_traits(W.type).vec_dot_type, x, n_tokens, in, qa));
//   STRATA_TRY(matmul_q(W_gate, qa, y_gate, pool));
//   STRATA_TRY(matmul_q(W_up, qa, y_up, pool));
// or in one call: matmul(W, x, n_tokens, y, pool, qa). Nothing allocates once `qa` has grown to
// the largest shape used.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "format/tensor_view.h"
#include "kernels/traits.h"

namespace strata {

// Batch invariance (design.md principle 3), on by default: every output's bits are the same for any
// number of tokens in the call (decode, prefill chunks, mixed batches), any row range and any
// thread count, so a sequence's logits do not depend on what shares its batch. It costs one-token
// products their gemv where that gemv's arithmetic differs from the many-token path's
// (KernelTraits::gemv_invariant). Off (set_batch_invariant(false), or STRATA_BATCH_INVARIANT=0 in
// the environment) is for measuring that cost.
bool batch_invariant();
void set_batch_invariant(bool on);

// Activation rows converted to a vec_dot_type. For f32 no copy is made: data points at the
// caller's x, which must then outlive every matmul_q that uses these acts.
struct QuantizedActs {
  GgmlType type = GgmlType::f32;
  int64_t n_tokens = 0;
  int64_t n = 0;          // elements per row
  size_t row_stride = 0;  // bytes between rows
  const uint8_t* data = nullptr;
  ScratchBuffer buf;  // owned storage for the converted rows

  const void* row(int64_t t) const { return data + static_cast<size_t>(t) * row_stride; }
};

// Convert x [n_tokens][n] to `type` (a vec_dot_type: f32, f16, bf16, q8_0 or q8_k) into *out.
// Errors: unsupported type, n not a multiple of the type's block size. pool (optional) splits
// the rows over threads.
Status quantize_activations(GgmlType type, const float* x, int64_t n_tokens, int64_t n, QuantizedActs& out,
                            ThreadPool* pool = nullptr);

// y[t][r] = W_row_r · x[t], rows split over the pool's threads. Errors name the weight and the
// mismatch (type without kernels, x in the wrong vec_dot_type, in != x.n, W not 2-D).
Status matmul_q(const TensorView& w, const QuantizedActs& x, float* y, ThreadPool& pool, int64_t ldy = 0);

// quantize_activations + matmul_q; `scratch` holds the converted x.
Status matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
              QuantizedActs& scratch, int64_t ldy = 0);

// Routed expert matmul (ggml's MUL_MAT_ID).
//   w    {in, out, n_expert} (3-D stack of experts)
//   ids  [n_tokens][n_used] int32 expert ids (each in [0, n_expert))
//   x    converted activations with either n_tokens rows (every slot of a token reads the same
//        input: gate / up) or n_tokens·n_used rows (one input per slot: down)
//   y    [n_tokens][n_used][out] f32: y[t][k] = W[ids[t][k]] · x[t or t·n_used+k]
// `scratch` holds the per-expert slot lists (grows once, then reused).
struct MatmulIdScratch {
  std::vector<int32_t> offsets;  // [n_expert + 1]
  std::vector<int32_t> slots;    // [n_tokens·n_used] slot indices t·n_used+k grouped by expert
  std::vector<int32_t> cursor;   // [n_expert] fill positions
  std::vector<int32_t> active;   // experts with at least one slot
};
Status matmul_id(const TensorView& w, const QuantizedActs& x, const int32_t* ids, int64_t n_tokens,
                 int64_t n_used, float* y, ThreadPool& pool, MatmulIdScratch& scratch);

// The unchecked core the calls above run on each thread, for callers that thread and validate
// themselves (model/linear): rows [r0, r1) of W (row r at w + r·w_stride) against nt activation
// rows already in W's vec_dot_type (x_t at x + t·x_stride): y[t·ldy + r] = W_r · x_t. Uses the
// type's register tiles (cache-blocked) when it has them, else one vec_dot per output.
// PRECOND: kt.can_matmul(), n % block_size == 0, every row inside its buffer.
void matmul_rows(const KernelTraits& kt, int64_t n, const void* w, size_t w_stride, int64_t r0, int64_t r1,
                 const void* x, size_t x_stride, int64_t nt, float* y, int64_t ldy);

// matmul_rows with gathered activation rows (the tokens routed to one expert): x[t] points at
// activation row t, y[t·ldy + r] = W_r · x[t]. Same per-element arithmetic as matmul_rows.
void matmul_rows_gather(const KernelTraits& kt, int64_t n, const void* w, size_t w_stride, int64_t r0,
                        int64_t r1, const void* const* x, int64_t nt, float* y, int64_t ldy);

// matmul_rows over all n_rows rows, split over the pool in blocks of rows handed out
// dynamically (one pool region, no static split a preempted thread could hold up).
void matmul_rows_parallel(ThreadPool& pool, const KernelTraits& kt, int64_t n, const void* w, size_t w_stride,
                          int64_t n_rows, const void* x, size_t x_stride, int64_t nt, float* y, int64_t ldy);

// Exact dequantization of one row of n elements (embedding lookups). Errors: unsupported type,
// n not a multiple of the block size.
Status dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace strata
