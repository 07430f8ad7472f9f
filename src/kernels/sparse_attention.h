// DeepSeek-V4's attention core behind the device seam (kernels/device.h DeviceSparseAttnWork;
// deepseek-v4.md §2.3, §2.3.1): one shared K = V row per key (MQA, head_dim wide); the keys of a
// query at position pos are the window rows max(0, pos − window + 1) .. pos of a ring, then the
// compressed rows it may see — all visible ones, 0 .. (pos + 1) / ratio − 1 (HCA), or the
// indexer's choice (CSA) — in ONE softmax with a per-head sink that only enters the denominator:
//   s_j = (q_h . k_j) * scale,  M = max(max_j s_j, sink_h)
//   o_h = sum_j exp(s_j - M) v_j / (exp(sink_h - M) + sum_j exp(s_j - M))
// The softmax is the one attention core (kernels/attention_core.h); this file says which rows it
// reads (sparse_keys) and runs a step's op on host-addressable rows (the CPU device's
// run_sparse_attention: the new rows written, then attend over the pool).
#pragma once

#include <cstdint>

#include "base/arena.h"
#include "base/thread_pool.h"
#include "kernels/attention_core.h"
#include "kernels/device.h"

namespace strata {

// The keys of the query at position pos: rows max(0, pos − window + 1) .. pos of `win`, then
// with comp (null: none) its rows sel[0..n_sel) when sel is given (the indexer's choice), else
// every visible row 0 .. (pos + 1) / ratio − 1.
AttnKeys sparse_keys(const KvRows& win, int window, const KvRows* comp, int ratio, int64_t pos,
                     const int32_t* sel, int64_t n_sel);

// w's op over host rows win / comp (comp null when w.ratio is 0; sinks null: none), checked by
// the caller: kv_new and comp_new written into their rows, then every token attends its keys.
// Typed rows read as f32 (kernels/kv_rows.h kv_rows_read_as_f32: f16, bf16, fp8_e4m3, mxfp4) are
// converted once per step and chunk of tokens into f32 scratch from the arena (at most
// window + 63 + max(4096, the selection per token) rows, or the visible compressed rows when
// nothing selects), shared by all query heads and by K and V, with the logits of reading them in
// place; the block types are read in place.
void sparse_attention(const DeviceSparseAttnWork& w, const KvRows& win, const KvRows* comp,
                      const float* sinks, ThreadPool& pool, Arena& arena);

// The most arena bytes sparse_attention carves (its own layout) for a step of n tokens at positions
// below n_ctx: n_head heads of head_dim, window and compressed rows (ratio; 0: none) of `type`
// (rotated: Hadamard-rotated rows), up to sel_stride selected rows per token (0: every visible
// row). What deepseek4's arena prices (model/deepseek4/ds4_forward.h ds4_arena_bytes).
uint64_t sparse_attention_scratch_bytes(int64_t n, int head_dim, int n_head, int window, int ratio,
                                        int64_t sel_stride, int64_t n_ctx, GgmlType type, bool rotated);

}  // namespace strata
