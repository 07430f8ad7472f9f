// DeepSeek-V4.1 forward over consecutive positions of one sequence (prefill and decode are the
// same code). Within a layer, tokens are processed in order, so every cache a token reads
// (window ring, compressed KV, index keys) holds exactly the positions <= its own: decode
// computes the same function as the causal full forward (the README's "index-key fix" holds by
// construction: a key owner's cache is always current before scoring).
//
// Per-sequence state (V41State):
//   per layer: window ring [window][head_dim] (FP8-rounded K=V rows, slot = pos % window);
//   per KV source: compressed KV [n_ctx/ratio][head_dim] (RoPE'd at the group start, FP4/E4M3),
//     index keys [n_ctx/ratio][index_head_dim] (owners; RoPE'd, FP4), and for ratio 2 the
//     pending (kv, score) f32 rows of an open group;
//   the token history (Engram n-grams look back max_ngram-1 tokens).
// Per step: hc streams [n][hc][dim], the pre-mix handed between sites (single-pass mHC), and the
// selections / candidate masks an index source publishes to the layers after it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "model/arch.h"
#include "model/deepseek_v41/v41_config.h"
#include "model/deepseek_v41/v41_engram.h"
#include "model/deepseek_v41/v41_rope.h"
#include "model/deepseek_v41/v41_weights.h"

namespace strata::v41 {

struct V41Model {
  Config cfg;
  EngramMeta meta;
  Weights w;
  Rope rope_plain, rope_comp;  // window-only layers / compressed layers
  // Engram rows, set by load_deepseek_v41_dir (never null once loaded): without an Engram budget
  // the tables are loaded with the weights (w.layers[l].e_embed / e_scale) and resident_rows
  // serves them; with one, the weights hold no table and engram_rows is the tiered store the
  // loader opened (V41Loaded::engram, model/engram_tiered.h), which must outlive every forward.
  std::unique_ptr<EngramRowSource> resident_rows;
  EngramRowSource* engram_rows = nullptr;
};

struct V41LayerState {
  std::vector<float> win;                  // [window][head_dim]
  std::vector<float> ckv;                  // KV sources: [rows][head_dim]
  std::vector<float> ik;                   // index-key owners: [rows][index_head_dim]
  std::vector<float> pend_kv, pend_score;  // ratio 2: the first token of an open group
  int64_t n_comp = 0;                      // compressed rows written
};

class V41State : public ArchState {
 public:
  V41State(const V41Model& m, int n_ctx, int n_batch);
  void reset() override;

  std::vector<V41LayerState> layers;
  std::vector<int32_t> history;  // raw token ids, [n_past]
  int n_ctx, n_batch;
  // step scratch
  std::vector<float> H;                                // [n_batch][hc][dim]
  std::vector<float> pre;                              // [n_batch][hc]
  std::vector<std::vector<std::vector<int32_t>>> sel;  // [layer][token] selected compressed rows
  std::vector<std::vector<uint8_t>> cand;              // [token] candidate mask of the candidate layer
  std::vector<float> discard;                          // [vocab]: the last row of a run nobody wants
  size_t cache_bytes() const;
};

// logits: [n][vocab] when all_logits, else [vocab] of the last token.
Status v41_forward(const V41Model& m, V41State& st, std::span<const int32_t> tokens, int64_t pos0,
                   bool all_logits, float* logits, ThreadPool& pool);

}  // namespace strata::v41
