// A step of the V4.1 forward as its layer blocks see it (v41_forward.h): the batch (runs of any
// number of sequences), each row's position in its sequence, the step scratch the first run's
// state lends, the pool. Blocks compute every row with the same arithmetic whatever shares the
// batch (the reference's per-row orders, v41_quant.h), so a sequence's bits never depend on it.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "model/arch.h"
#include "model/deepseek_v41/v41_forward.h"

namespace strata::v41 {

struct Step {
  const V41Model& m;
  const Batch& b;
  V41Scratch& sc;
  ThreadPool& pool;
  std::vector<int64_t> pos;         // [n]: the row's position in its sequence
  std::vector<int64_t> s_ref;       // [n]: pos + 1, the reference forward the row's f32 Linears follow
  ExpertSource* experts = nullptr;  // fast: the routed experts' source (the lender's), null: resident
  int64_t n() const { return b.n(); }
  V41State& state(const SeqRun& r) const { return static_cast<V41State&>(*r.state); }
  bool fast() const { return m.numerics == V41Numerics::fast; }
};

// The primitives of the forward in the step's numerics (v41_forward.h V41Numerics), v41_ops.cpp:
// Y [n][W.rows] = X [n][W.cols] . W^T. Oracle: s_ref null — the reference's bf16 Linear
// (linear_bf16_rows, output rounded to bf16); s_ref given (per row) — its f32 Linear in BLAS order
// (linear_f32_rows). Fast: kernels/linear.h over W.tv, rounded to bf16 when s_ref is null.
void lin(Step& s, const Mat& W, const float* X, int64_t n, float* Y, const int64_t* s_ref = nullptr);
// The fast Linear over any weight view (e.g. a row range of a Mat's), rounded to bf16 if asked.
void lin_fast(Step& s, const TensorView& w, const float* X, int64_t n, float* Y, bool round_bf16);
// y = bf16(w * x / rms(x)) over n values (w may be null).
void norm_bf16(const Step& s, const float* x, const float* w, int64_t n, float eps, float* y);
// RoPE of the last rope dims of n_rows rows of row_len at pos (comp: the compressed layers' YaRN
// rope), rounded to bf16; inverse: the conjugate rotation.
void rope_bf16(const Step& s, bool comp, float* x, int64_t n_rows, int64_t row_len, int64_t pos,
               bool inverse);

// Attention sub-layer l over the batch: x [n][dim] (normed, bf16) -> y [n][dim]. The projections
// run over all rows; each run's tokens then go in order through its caches (window ring,
// compressor, indexer, selection, attention), as the reference's one-token-at-a-time caches need.
void attention_layer(Step& s, int l, const float* x, float* y);

// Fast numerics: the routed experts and the shared expert through the MoE loop (model/blocks/moe.h),
// the routed ones from s.experts when there is one (routing reported through its on_route). Error:
// a failed expert read (y is then unspecified).
Status moe_layer_fast(Step& s, int l, const float* x, float* y);

// MoE sub-layer l over the batch: x [n][dim] -> y [n][dim]; the router per row, each used routed
// expert once over the rows routed to it, the shared expert over all rows.
void moe_layer(Step& s, int l, const float* x, float* y);

}  // namespace strata::v41
