// The shared multi-head attention block of the standard decoders (qwen3moe, llama, qwen2moe,
// gpt-oss): projections (+ optional biases), optional per-head q/k RMSNorm, RoPE (NORM / NEOX,
// YaRN), GQA, causal mask with an optional sliding window, optional per-head sinks, output
// projection (+ optional bias). K and V rows are appended to the layer's KvLayer parts; the
// attention itself is kernels/attention_core.h's (each query's causal / window key range).
#pragma once

#include <cstdint>
#include <span>

#include "base/arena.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "format/tensor_view.h"
#include "kernels/ops.h"
#include "kernels/attention_core.h"
#include "kernels/kv_rows.h"

namespace strata {

struct AttnWeights {
  const TensorView* wq = nullptr;  // {n_embd, n_head*hd_k}
  const TensorView* wk = nullptr;  // {n_embd, n_head_kv*hd_k}
  const TensorView* wv = nullptr;  // {n_embd, n_head_kv*hd_v}
  const TensorView* wo = nullptr;  // {n_head*hd_v, n_embd}
  const float* bq = nullptr;       // optional biases, same widths as the outputs
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* bo = nullptr;
  const float* q_norm = nullptr;  // optional [hd_k] per-head RMSNorm weights (qwen3)
  const float* k_norm = nullptr;
  const float* sinks = nullptr;  // optional [n_head] sink logits (gpt-oss)
};

struct AttnConfig {
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  RopeStyle rope_style = RopeStyle::rope_style_norm;
  RopeParams rope;  // rope.n_rot <= head_dim_k, rotates the first n_rot dims of each head
  int window = 0;   // > 0: key j visible from query p iff 0 <= p - j < window
  float scale = 1.0f;
  float eps = 1e-6f;
};

// A run of consecutive tokens of one sequence inside a multi-sequence batch: rows t0 .. t0+n-1 of
// x / out sit at positions pos0 .. pos0+n-1 of the sequence whose K and V rows are k / v
// ([n_head_kv*hd_k] and [n_head_kv*hd_v] wide): rows pos0.. are written, rows < pos0 must hold
// the sequence's earlier keys.
struct AttnSegment {
  const KvRows* k = nullptr;
  const KvRows* v = nullptr;
  int64_t pos0 = 0;
  int64_t t0 = 0;
  int64_t n = 0;
};

// Several sequences in one block (batched decode of the engine's slots): the projections run once
// over all rows; RoPE, the cache rows and the attention of each row follow its segment. Segments
// cover rows 0..n-1 in order. Every row's result equals the single-sequence call's.
void attention_forward_segments(const AttnConfig& cfg, const AttnWeights& w,
                                std::span<const AttnSegment> segs, const float* x, int64_t n, float* out,
                                ThreadPool& pool, Arena& arena);

}  // namespace strata
