// DeepSeek-V4 attention core (deepseek-v4.md §2.3, §2.3.1; fixtures README §6-7).
//
// One shared K = V vector per key (MQA, head_dim wide); the key list of a query is the window
// rows plus the compressed entries it may see (all visible for HCA, the indexer's top-k for
// CSA), all in ONE softmax with a per-head sink that only enters the denominator:
//   s_j = (q_h . k_j) * scale,  M = max(max_j s_j, sink_h)
//   o_h = sum_j exp(s_j - M) v_j / (exp(sink_h - M) + sum_j exp(s_j - M))
// After attention the caller inverse-ropes the last n_rot dims of every head (rope_rows with
// inverse = true) and applies the grouped low-rank output projection:
//   z_g = wo_a[g] . o[g-th group of n_head/G consecutive heads]   (o_lora values per group)
//   y   = wo_b . concat_g z_g
#pragma once

#include <cstdint>

namespace strata::ds4 {

// q [n_head][hd]; keys[j] -> [hd] (j < n_keys; used as values too); sinks [n_head] or null;
// scratch [n_keys]; out [n_head][hd]. n_keys may be 0 (then out = 0, or 0 with a sink).
void attend_with_sink(const float* q, int n_head, int hd, const float* const* keys, int64_t n_keys,
                      float scale, const float* sinks, float* scratch, float* out);

// Grouped first output projection for f32 weights: wo_a [G*o_lora][group_in] row-major
// (GGUF attn_output_a {group_in, G*o_lora}), group_in = n_head*hd/G; o [G*group_in]; z [G*o_lora].
void grouped_out_a_f32(const float* o, const float* wo_a, int G, int o_lora, int64_t group_in, float* z);

}  // namespace strata::ds4
