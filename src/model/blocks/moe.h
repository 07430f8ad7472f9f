// The mixture-of-experts FFN block (the one MoE loop: the standard decoders' and deepseek4's); the
// dense SwiGLU FFN is kernels/expert_ffn.h's ffn_swiglu_forward.
//
// Router variants (MoeRouter):
//   softmax_topk_renorm  p = softmax(W_r·h) over all experts → top-k → w /= max(Σw, 2^-14)
//                        (qwen3moe, Mixtral-style llama)
//   softmax_topk         as above, weights not renormalised (qwen2moe)
//   topk_softmax         top-k of the raw logits (+ router bias) → softmax over the k (gpt-oss)
// The input is quantized once per layer; slots (token, choice) are grouped by expert so that each
// expert's weights are read once per step whatever the batch: one pool region computes gate, up,
// SwiGLU and the down input's quantization per (expert, row block), then down per (expert, row
// block) as soon as that expert's first phase is done, the shared expert's items in the same
// region (the compute: kernels/expert_ffn.h). Experts a device holds (the expert source's views
// name it) are submitted to that device (kernels/device.h) while the host computes its own.
// Expert outputs are summed per token in slot order (as llama.cpp does). Scratch comes from the
// session's arena.
#pragma once

#include <cstdint>

#include "base/arena.h"
#include "base/thread_pool.h"
#include "format/tensor_view.h"
#include "kernels/expert_ffn.h"
#include "memory/experts/expert_source.h"

namespace strata {

enum class MoeRouter { moe_router_softmax_topk_renorm, moe_router_softmax_topk, moe_router_topk_softmax };
struct MoeWeights {
  const TensorView* gate_inp = nullptr;   // {n_embd, n_expert}
  const float* gate_inp_b = nullptr;      // optional [n_expert]
  const TensorView* gate_exps = nullptr;  // {n_embd, n_ff, n_expert}
  const TensorView* up_exps = nullptr;    // {n_embd, n_ff, n_expert}
  const TensorView* down_exps = nullptr;  // {n_ff, n_embd, n_expert}
  const float* gate_exps_b = nullptr;     // optional [n_expert][n_ff]
  const float* up_exps_b = nullptr;       // optional [n_expert][n_ff]
  const float* down_exps_b = nullptr;     // optional [n_expert][n_embd]
  // Shared expert (optional): always on, scaled by sigmoid(gate_inp_shexp · h) when present.
  const TensorView* gate_shexp = nullptr;  // {n_embd, n_ff_shexp}
  const TensorView* up_shexp = nullptr;
  const TensorView* down_shexp = nullptr;  // {n_ff_shexp, n_embd}
  const float* gate_inp_shexp = nullptr;   // optional [n_embd]
};

struct MoeConfig {
  int n_embd = 0;
  int n_expert = 0;
  int n_used = 0;
  int n_ff = 0;
  int n_ff_shexp = 0;
  MoeRouter router = MoeRouter::moe_router_softmax_topk_renorm;
  ExpertAct act = ExpertAct::expert_act_swiglu;
  float oai_alpha = 1.702f;
  float oai_limit = 7.0f;
  float clamp = 0.0f;                                  // expert_act_swiglu_clamped: the routed experts' L
  ExpertAct shexp_act = ExpertAct::expert_act_swiglu;  // the shared expert's activation
  float shexp_clamp = 0.0f;                            // and its L (swiglu_clamped)
};

// x: [n][n_embd] normed input; out: [n][n_embd] = Σ_k w_k·expert_k(x) (+ gated shared expert).
// experts: where routed experts' weights come from (memory/expert_source.h: a tiered store that
// may have to read them); null = the mmapped tensors. `layer` names this block to it. Errors: a
// failed expert read (names the file and offset); out is then unspecified.
// min_share: null, or per row the SeqKnobs::expert_min_share of its sequence (model/arch.h): a
// row's choices weighing less than that share of the mean choice (never its heaviest one) are
// dropped before anything runs — sel -1 for the
// expert source, which reads and counts only the kept — and its kept weights rescaled to the sum
// of all k. A row with 0 is computed exactly as without min_share.
Status moe_forward(const MoeConfig& cfg, const MoeWeights& w, const float* x, int64_t n, float* out,
                   ThreadPool& pool, Arena& arena, ExpertSource* experts = nullptr, int layer = 0,
                   const float* min_share = nullptr);

// The experts of a routing made elsewhere (deepseek4's sqrt-softplus / hash routing): sel, wts
// [n][n_used] (expert ids, weights; an id of -1 is a dropped choice: nothing runs, nothing added;
// every row keeps at least one); w.gate_inp unused. Grouped by expert, the shared expert in the
// same pool region, outputs summed per token in choice order, as moe_forward. experts->on_route is
// the caller's to call.
Status moe_experts_forward(const MoeConfig& cfg, const MoeWeights& w, const float* x, int64_t n,
                           const int32_t* sel, const float* wts, float* out, ThreadPool& pool, Arena& arena,
                           ExpertSource* experts = nullptr, int layer = 0);

// The drop of moe_forward's min_share over a routing made elsewhere (sel / wts [n][K], min_share
// [n]): per row with a share s > 0, choices weighing less than s·(Σw)/K except the heaviest get
// sel -1 and weight 0, and the kept weights are scaled to Σw. Rows with 0 are untouched.
void moe_drop_light_choices(const float* min_share, int64_t n, int K, int32_t* sel, float* wts);

}  // namespace strata
