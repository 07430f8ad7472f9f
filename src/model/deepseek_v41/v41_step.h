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
  std::vector<int64_t> pos;    // [n]: the row's position in its sequence
  std::vector<int64_t> s_ref;  // [n]: pos + 1, the reference forward the row's f32 Linears follow
  int64_t n() const { return b.n(); }
  V41State& state(const SeqRun& r) const { return static_cast<V41State&>(*r.state); }
};

// Attention sub-layer l over the batch: x [n][dim] (normed, bf16) -> y [n][dim]. The projections
// run over all rows; each run's tokens then go in order through its caches (window ring,
// compressor, indexer, selection, attention), as the reference's one-token-at-a-time caches need.
void attention_layer(Step& s, int l, const float* x, float* y);

// MoE sub-layer l over the batch: x [n][dim] -> y [n][dim]; the router per row, each used routed
// expert once over the rows routed to it, the shared expert over all rows.
void moe_layer(Step& s, int l, const float* x, float* y);

}  // namespace strata::v41
