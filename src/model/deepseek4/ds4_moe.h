// DeepSeek-V4 MoE routing and expert activation (deepseek-v4.md §2.4, fixtures README §7).
//
//   s = sqrt(softplus(router . c2))                       per expert, f32
//   top-k layers:  I = top_k(s + bias)   (bias only selects; weights use s)
//   hash layers:   I = tid2eid[token]    (no bias)
//   w_i = s_i / max(sum_I s, 6.103515625e-5) * scale     (normalisation if norm_w)
//   expert:  y = down . (silu(min(gate.c2, L)) * clamp(up.c2, -L, L)); L from the GGUF
// The shared expert uses the same activation with its own clamp (swiglu_clamp_shexp). The experts
// run in the one MoE loop (model/blocks/moe.h moe_experts_forward, ExpertAct swiglu_clamped); this
// file holds DeepSeek's routing.
#pragma once

#include <cstdint>

namespace strata::ds4 {

inline constexpr float kMoeMinWeightSum = 6.103515625e-5f;  // ggml's clamp of the normaliser

// scores[e] = sqrt(softplus(logits[e])).
void sqrt_softplus_scores(const float* logits, int n_expert, float* scores);

// Bias-corrected top-k: ids = the k largest (scores + bias) (bias may be null), ties to the
// lower expert id; weights from scores. Returns nothing; ids [k], weights [k].
void route_topk(const float* scores, const float* bias, int n_expert, int k, bool norm_w, float scale,
                int32_t* ids, float* weights);

// Hash routing: ids given (tid2eid row of the token, k entries); weights from scores.
void route_weights(const float* scores, const int32_t* ids, int k, bool norm_w, float scale, float* weights);

}  // namespace strata::ds4
