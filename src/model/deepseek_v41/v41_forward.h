// DeepSeek-V4.1 forward over a batch of runs of any number of sequences (prefill and decode are
// the same code). Per-token work that reads no cache (the Engram lookups, the mHC sites, the
// attention projections, the MoE with routed experts grouped by expert, the head over the wanted
// rows) runs over all rows of the batch; each sequence's tokens then go through its caches in
// order within each layer (v41_attention.cpp), so every cache a token reads (window ring,
// compressed KV, index keys) holds exactly the positions <= its own: decode computes the same
// function as the causal full forward (the README's "index-key fix" holds by construction: a key
// owner's cache is always current before scoring), and a row's bits never depend on the batch.
//
// Per-sequence state (V41State): a KvCache from v41_kv_spec —
//   per layer: "window" ring of `window` rows (FP8-rounded K=V rows; tokens go one at a time);
//   per KV source: "compressed_r<ratio>" [ceil(n_ctx/ratio)][head_dim] (RoPE'd at the group
//     start, FP4/E4M3), "index_keys_r<ratio>" [ceil(n_ctx/ratio)][index_head_dim] (owners;
//     RoPE'd, FP4), and for ratio 2 "compressor_state_r2": the pending kv + score (f32) of an
//     open group;
//   and the token history (Engram n-grams look back max_ngram-1 tokens).
// The rows are stored in the reference's own element types by default (v41_kv_spec_typed: the
// window as fp8_e4m3 blocks, compressed KV as nvfp4, index keys as mxfp4, quant/'s codecs), or
// in f32 when asked (-ctk f32). FP4 rows are rounded to their grid first (v41_quant.h
// fake_quant_fp4*; the codecs re-encode grid values exactly), FP8 window rows are encoded as they
// are (the FP8 codec's scale and rounding are the reference's), so the stored bytes decode to
// exactly the values the f32 cache holds (E2M1's -0 reads +0): the same logits either way.
// Step scratch (V41Scratch, lent by the step's first run): hc streams [n][hc][dim], the pre-mix
// handed between sites (single-pass mHC), and the selections / candidate masks an index source
// publishes to the layers after it, per batch row.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/arena.h"
#include "base/thread_pool.h"
#include "kernels/ops.h"
#include "kv/kv_cache.h"
#include "model/arch.h"
#include "model/deepseek_v41/v41_config.h"
#include "model/deepseek_v41/v41_engram.h"
#include "memory/experts/expert_source.h"
#include "model/deepseek_v41/v41_rope.h"
#include "model/deepseek_v41/v41_weights.h"

namespace strata::v41 {

// How the forward computes (the same function either way; tests/model/v41_fixture_test.cpp):
//   oracle — the reference's own summation orders and roundings (v41_quant.h: bf16 Linears pair by
//     pair, f32 Linears in OpenBLAS's order, torch's sum and exp, f32 RoPE), scalar, f32 weights:
//     bit-identical to the official PyTorch code on the fixtures; for tests and `--v41-numerics oracle`;
//   fast (the default) — strata's multi-threaded SIMD kernels on native weights (v41_weights.h):
//     every Linear through kernels/linear.h, the routed and shared experts through the MoE loop
//     (model/blocks/moe.h), attention through the attention core (kernels/attention_core.h), the
//     mHC coefficients / collapse / post and RoPE as deepseek4's (ds4_mhc.h, ds4_rope.h), RMSNorm
//     kernels/ops.h's; activations are still rounded to bf16 where the reference rounds them, and
//     the FP8 / FP4 activation roundings of the KV rows and the indexer are kept.
enum class V41Numerics { fast, oracle };

struct V41Model {
  Config cfg;
  V41Numerics numerics = V41Numerics::fast;
  RopeParams fast_rope_plain, fast_rope_comp;  // fast: kernels/ops.h RoPE of the two kinds of layer
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

// The KV parts of one sequence (what V41State allocates and the plan prices), with the
// reference's own storage types as the parts' native types.
KvSpec v41_kv_spec(const Config& c);
// The parts at the types the caches hold under the KV types asked for: a tool's default
// (KvTypes::is_default) gives each part its native type (the reference's; f32 state), anything
// else kv_spec_typed's (what `strata plan` prices for a type asked for; new_state takes f32 only).
KvSpec v41_kv_spec_typed(KvSpec s, const KvTypes& t);
// What a V41State made with these KV types allocates; an error names a type it cannot hold.
Result<KvSpec> v41_kv_spec_for(const Config& c, const KvTypes& t);

struct V41LayerState {       // parts of V41State::kv (null: the layer owns none)
  RowCache* win = nullptr;   // [window][head_dim]
  RowCache* ckv = nullptr;   // KV sources: [rows][head_dim]
  RowCache* ik = nullptr;    // index-key owners: [rows][index_head_dim]
  RowCache* pend = nullptr;  // ratio 2: kv [head_dim] then score [head_dim] of an open group's first token
  int64_t n_comp = 0;        // compressed rows written
};

struct V41Scratch {
  std::vector<float> H;                                // [n_batch][hc][dim]
  std::vector<float> pre;                              // [n_batch][hc]
  std::vector<std::vector<std::vector<int32_t>>> sel;  // [layer][row] selected compressed rows
  std::vector<std::vector<uint8_t>> cand;              // [row] candidate mask of the candidate layer
  Arena arena;                                         // fast: kernels' scratch, reset every step
};

class V41State : public ArchState {
 public:
  // share_scratch: borrow that state's step scratch (same model and n_batch), else own one.
  // spec: v41_kv_spec_for's (null: every part f32).
  V41State(const V41Model& m, int n_ctx, int n_batch, const V41State* share_scratch = nullptr,
           const KvSpec* spec = nullptr);
  void reset() override;
  ArchMemory memory() const override { return {kv.bytes(), 0, {}}; }

  KvCache kv;
  std::vector<V41LayerState> layers;
  std::vector<int32_t> history;  // raw token ids, [n_past]
  int n_ctx, n_batch;
  std::shared_ptr<V41Scratch> scratch;
  // Where the fast MoE reads routed experts (StateOptions::experts: the tiered store); null: the
  // weights' resident stacks. The step's lender's is used.
  ExpertSource* experts = nullptr;
};

// One step over a batch of any number of sequences (model/arch.h Batch; every run's state a
// V41State, the first lending its scratch). logits: [out_rows][vocab].
Status v41_forward(const V41Model& m, const Batch& b, float* logits, ThreadPool& pool);

}  // namespace strata::v41
