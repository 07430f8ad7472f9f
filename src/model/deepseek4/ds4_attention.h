// DeepSeek-V4 attention's key sets (deepseek-v4.md §2.3, §2.3.1; fixtures README §6-7).
//
// One shared K = V vector per key (MQA, head_dim wide); the keys of a query at position p are the
// window rows plus the compressed entries it may see (all visible for HCA, the indexer's top-k for
// CSA), all in ONE softmax with a per-head sink that only enters the denominator:
//   s_j = (q_h . k_j) * scale,  M = max(max_j s_j, sink_h)
//   o_h = sum_j exp(s_j - M) v_j / (exp(sink_h - M) + sum_j exp(s_j - M))
// That softmax is the one attention core (kernels/attention_core.h); this file says which
// rows it reads. After attention the caller inverse-ropes the last n_rot dims of every head
// (rope_rows with inverse = true) and applies the grouped low-rank output projection:
//   z_g = wo_a[g] . o[g-th group of n_head/G consecutive heads]   (o_lora values per group)
//   y   = wo_b . concat_g z_g
#pragma once

#include <cstdint>

#include "kernels/attention_core.h"
#include "kv/row_cache.h"

namespace strata::ds4 {

// The keys of the query at position pos of a layer with compress ratio `ratio` (0, 4 or 128):
// rows max(0, pos − n_swa + 1) .. pos of the window ring, then for ratio 128 the compressed
// entries 0 .. compressed_visible(pos) − 1 of `comp`, for ratio 4 its rows sel[0..n_sel) (the
// indexer's choice). comp may be null when ratio is 0.
AttnKeys ds4_keys(const RowCache& window, int n_swa, const RowCache* comp, int ratio, int64_t pos,
                  const int32_t* sel, int64_t n_sel);

}  // namespace strata::ds4
