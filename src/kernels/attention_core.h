// The attention core, the one definition the architectures' attention calls (V4.1's reference
// path keeps its own, see docs/design.md): for query rows of one sequence (tokens × heads),
// o = Σ_j softmax_j(scale·q·k_j) · v_j over each token's key set, with an optional per-head sink
// logit that joins the max and the denominator:
//   M = max(max_j s_j, sink),  o = Σ_j e^(s_j − M) v_j / (e^(sink − M) + Σ_j e^(s_j − M)).
// A token's key set is given as blocks of cache rows: up to kMaxRanges contiguous ranges of row
// caches (the causal / sliding-window range of a K/V cache or a window ring, a run of compressed
// entries), then a gathered list of rows of a cache (e.g. the indexer's selected compressed
// entries). Cache rows hold n_head_kv heads; query head h reads kv head h / (n_head/n_head_kv).
// The caller says which rows; rows of any KV element type (kernels/kv_rows.h: f32, f16, bf16,
// q8_0, q4_0, iq4_nl) are read in place by the ops table's per-type products (KvRowOps, whose
// numerics kernels/ops.h states); a paged KV layer, or a device tier, is meant to hand
// the same key sets (block ranges, gathered rows) to its own version of this loop.
//
// Blocked and one pass: a work item is (a block of tokens, one kv head, a run of its query heads);
// each key block is read once per item while all its query rows pass over it, with an online
// softmax (running max and denominator per row, accumulators rescaled when the max grows), so no
// scores row spans the whole key set. A range's key blocks start at absolute multiples of
// kAttnKeyBlock of the row index, a list's at multiples of kAttnKeyBlock of the list position:
// each row meets its keys in the same blocks (the same online-softmax steps, in the order ranges
// then list) whatever tokens share its item, so a sequence's result does not depend on how its
// prompt was chunked, what shares the batch, or the thread count.
#pragma once

#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "kernels/kv_rows.h"

namespace strata {

constexpr int64_t kAttnKeyBlock = 64;  // keys per online-softmax step: a head's K and V block stay in L1

struct AttnShape {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  float scale = 1.0f;
  const float* sinks = nullptr;  // optional [n_head] sink logits
};

// Rows [j0, j1) of a K and a V cache (k and v may be the same cache: K = V).
struct AttnKeyRange {
  const KvRows* k = nullptr;
  const KvRows* v = nullptr;
  int64_t j0 = 0;
  int64_t j1 = 0;
};

// Rows idx[0..n) of a K and a V cache, attended in that order.
struct AttnKeyList {
  const KvRows* k = nullptr;
  const KvRows* v = nullptr;
  const int32_t* idx = nullptr;
  int64_t n = 0;
};

// One token's keys: ranges[0..n_ranges) in order, then the list. The tokens of one call must use
// the same caches for range i (their rows may differ).
struct AttnKeys {
  static constexpr int kMaxRanges = 2;
  AttnKeyRange ranges[kMaxRanges];
  int n_ranges = 0;
  AttnKeyList list;
  int64_t count() const;
};

// Query rows t0 .. t1−1 and query heads [h0, h1) (all of one kv head) against their keys:
// q [n][n_head·hd_k] and o [n][n_head·hd_v] rows by token, keys[i] the key set of token t0 + i.
// At most kAttnMaxRows query rows ((t1 − t0)·(h1 − h0)). A row without keys (and no sink) gets 0.
constexpr int64_t kAttnMaxRows = 1024;
void attend_rows(const AttnShape& s, const float* q, int64_t t0, int64_t t1, int h0, int h1,
                 const AttnKeys* keys, float* o);

// The tokens per work item for a shape: kAttnQueryBlock, fewer when a kv head has many query heads.
constexpr int64_t kAttnQueryBlock = 8;
int64_t attn_query_block(const AttnShape& s);

// Every token 0..n−1 (keys[t] its key set) over the pool, items as above; the query heads of a kv
// head are split into runs when there are fewer items than threads (decode).
void attend(const AttnShape& s, const float* q, int64_t n, std::span<const AttnKeys> keys, float* o,
            ThreadPool& pool);

// The key set of the standard decoder's query at position p: rows max(0, p − window + 1) .. p of
// its K and V caches (window 0: from 0).
AttnKeys causal_keys(const KvRows& k, const KvRows& v, int64_t p, int window);

}  // namespace strata
