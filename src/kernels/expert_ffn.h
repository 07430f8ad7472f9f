// The grouped expert FFN: a MoE step's routed experts (or a dense SwiGLU FFN as one expert)
// applied to the tokens routed to them, each expert's weights read once per step whatever the
// batch. The CPU's compute behind the device seam's expert op (kernels/device.h) and the one
// compute of model/blocks/moe.cpp's MoE loop.
//
// Slot s = t·K + k (token t's k-th choice); slots[off[e] .. off[e+1]) are expert e's slots in
// token order, and every array indexed "grouped" follows that order. For each expert e and each
// of its slots s:
//   h_s = act(gate_e·x_t + gb_e, up_e·x_t + ub_e) → quantized to down's vec_dot_type (hq row s)
//   y[s] = wt_s · (down_e·h_s + db_e)
// Phase 1 (gate, up, act, quantize) and phase 2 (down) share one pool region, work items
// (expert, block of rows); every output element is the same kernel call whatever the grouping,
// the batch or the experts computed beside it (batch invariance; streamed == resident == on
// another device).
#pragma once

#include <atomic>
#include <cstdint>

#include "base/arena.h"
#include "base/thread_pool.h"
#include "format/tensor_view.h"

namespace strata {

enum class ExpertAct {
  expert_act_swiglu,          // silu(g) ⊙ u
  expert_act_swiglu_oai,      // gpt-oss: min(g,L)·σ(α·min(g,L))·(clamp(u,-L,L) + 1)
  expert_act_swiglu_clamped,  // deepseek4: silu(min(g,L)) ⊙ clamp(u,-L,L); L <= 0: plain swiglu
};

// One expert matrix {in, out}: rows `nb1` bytes apart (a trivially copyable TensorView subset,
// so per-expert tables live in the arena).
struct ExpertMat {
  const uint8_t* data = nullptr;
  size_t nb1 = 0;
  int64_t in = 0;
  GgmlType type = GgmlType::f32;
};
// Expert e of a {in, out, n_expert} stack (or the 2-D matrix itself, e = 0).
ExpertMat expert_mat(const TensorView& v, int64_t e = 0);

// What one step's expert work is, whoever computes it (the host's pool region, a device): shapes,
// activation, the grouping of the slots, routing weights, biases and where the outputs go.
struct ExpertFfnStep {
  int64_t d = 0, F = 0;
  ExpertAct act = ExpertAct::expert_act_swiglu;
  float alpha = 0.0f, limit = 0.0f;
  const int32_t* off = nullptr;    // [E + 1]
  const int32_t* slots = nullptr;  // grouped
  const float* wts = nullptr;      // [n_slots] or null (weight 1)
  const float* gate_b = nullptr;   // optional [E][F]
  const float* up_b = nullptr;     // optional [E][F]
  const float* down_b = nullptr;   // optional [E][d]
  float* y = nullptr;              // [n_slots][d] by slot
};

// The host's run of a step: the matrices of the experts computed, the activation tables and the
// scratch. Built by expert_ffn_prepare (or expert_ffn_prepare_dense); the caller fills gate / up /
// down [E] for the experts it runs (the weights may come from anywhere: mmapped, a tier slot, a
// device buffer mapped on the host).
struct ExpertFfn : ExpertFfnStep {
  const ExpertMat* gate = nullptr;  // [E], filled for the experts computed
  const ExpertMat* up = nullptr;
  const ExpertMat* down = nullptr;

  // Filled by expert_ffn_prepare.
  const float* x = nullptr;  // [n][d], the step's input (for kernels/activation_tap.h)
  int K = 1;
  const void** xg = nullptr;  // grouped: gate input row of the slot's token
  const void** xu = nullptr;  // grouped: up input row
  const void** hp = nullptr;  // grouped: hq row of the slot
  uint8_t* hq = nullptr;      // [n_slots][hrow] by slot
  size_t hrow = 0;
  GgmlType ht = GgmlType::f32;  // down's vec_dot_type
  float* tbuf = nullptr;        // per-thread scratch, tstride floats each
  int64_t tstride = 0;
  int64_t rb1 = 0;                        // phase-1 rows per item
  std::atomic<int32_t>* done1 = nullptr;  // [n_groups]: phase-1 items finished, per listed expert
};

// Fills the activation tables of s for x [n][d] (d = s.d) and n·K slots grouped by s.off / s.slots
// over n_groups experts, and the scratch for `n_threads` threads, all from the arena. gate / up /
// down: any expert's matrices (their types and shapes). The input is converted once per distinct
// vec_dot_type.
void expert_ffn_prepare(ExpertFfn& s, const ExpertMat& gate, const ExpertMat& up, const ExpertMat& down,
                        const float* x, int64_t n, int K, int n_groups, int n_threads, Arena& arena);

// A dense SwiGLU FFN as a one-expert step over x [n][in] (one slot per token, the slot rows are
// out [n][down's out] rows): mats = {gate, up, down}, kept alive by the caller while it runs;
// s.act / s.limit as set by the caller.
void expert_ffn_prepare_dense(ExpertFfn& s, const ExpertMat* mats, const float* x, int64_t n, float* out,
                              int n_threads, Arena& arena);

// Experts experts[0..n) of s (their matrices filled in).
struct ExpertFfnJob {
  const ExpertFfn* s = nullptr;
  const int32_t* experts = nullptr;
  int n = 0;
};
constexpr int kMaxExpertFfnJobs = 2;

// Both phases of every job's experts (routed and shared, at most kMaxExpertFfnJobs) in one pool
// region: all phase-1 items first, then the down items, each waiting until its expert's phase-1
// items are done (a thread that runs out of phase-1 items goes on to the first expert's down rows
// instead of idling at a region end).
void expert_ffn_run(const ExpertFfnJob* jobs, int n_jobs, ThreadPool& pool);

// Dense SwiGLU FFN: out = down · (silu(gate·x) ⊙ up·x). x: [n][in], out: [n][down.ne1].
void ffn_swiglu_forward(const TensorView& gate, const TensorView& up, const TensorView& down, const float* x,
                        int64_t n, float* out, ThreadPool& pool, Arena& arena);

}  // namespace strata
