// DeepSeek-V4 forward pass over a batch of tokens of any number of sequences (prefill and decode
// are the same code; n is a dimension). The per-sequence state lives in Ds4State:
//   KvCache parts per layer (kv/, from ds4_kv_spec): "window" ring of raw K=V rows
//     (window-1+n_batch rows) and "csa" / "hca" compressed entries — both in buffers of the device
//     the layers run on (caches_on; only Device::run_sparse_attention reads and writes them) —,
//     "indexer" keys (CSA layers, host: the indexer scores them on the host), and
//     the compressors' state parts "csa_state" / "hca_state" / "indexer_state" that a
//     CompressorState (model/ds4_compressor.h) works in: the rolling (kv, score) rows of the
//     partial block and, for ratio 4, of the previous block — what lets token-by-token decoding
//     reproduce the batch result.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/arena.h"
#include "base/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/arch.h"
#include "model/deepseek4/ds4_compressor.h"
#include "model/deepseek4/ds4_hparams.h"
#include "model/deepseek4/ds4_weights.h"

namespace strata::ds4 {

struct Ds4LayerState {
  int window = -1, comp = -1, index = -1;  // part indices in the KvLayer
  CompressorState comp_state, index_state;
};

// The KV parts of one sequence: every layer's window; CSA layers (ratio 4) compressed entries,
// indexer keys and both compressors' state; HCA layers (ratio 128) compressed entries and state.
// Types (kv_part_type): the window and compressed rows (K = V) -ctk's, the indexer keys
// --kv-type-index's (default -ctk's), the state f32.
KvSpec ds4_kv_spec(const Ds4Params& p, const KvTypes& types = {});
// The types a state holds for the types asked: a tool's default (not asked for) keeps f32 (the
// fixtures' and oracle's), K = V so -ctv is ignored (v = k). Every part must hold whole blocks.
Result<KvTypes> ds4_kv_types(const Ds4Params& p, const KvTypes& asked);
KvTypes ds4_kv_types_resolved(const KvTypes& asked);  // the same without the check (the plan's)
// The step scratch (arena) a state allocates for steps of n_batch tokens at contexts up to n_ctx: a
// generous estimate of one step's buffers (streams, attention, indexer scores and their top-k
// order over the visible compressed entries, MoE), plus the most the attention op carves on a
// layer (kernels/sparse_attention.h sparse_attention_scratch_bytes: typed rows converted to f32 at
// the state's KV types, resolved as ds4_kv_types does); the arena grows once if it is short.
uint64_t ds4_arena_bytes(const Ds4Params& p, int64_t n_batch, int64_t n_ctx, const KvTypes& types = {});

class Ds4State : public ArchState {
 public:
  Ds4State(const Ds4Params& p, int n_ctx, int n_batch, const Ds4State* share_scratch = nullptr,
           const KvTypes& types = {});
  // Moves every layer's window and compressed rows into buffers of dev (which outlives the
  // state): the rows the attention op reads. Errors are the device's (its budget).
  Status caches_on(Device& dev);
  void reset() override;
  ArchMemory memory() const override;

  KvCache kv;
  std::vector<Ds4LayerState> layers;
  std::vector<float> hadamard;  // [hb][hb] for the indexer (hb = hadamard_block(ihd); empty: none)
  int hb = 0;
  std::shared_ptr<Arena> scratch;  // the step scratch: own, or borrowed (StateOptions::share_scratch)
  bool owns_scratch = false;
  int n_ctx, n_batch;
  KvTypes types;                    // the caches' element types (ds4_kv_types)
  ExpertSource* experts = nullptr;  // routed experts from a tiered store (null: mmapped)
};

// One step over a batch of any number of sequences (model/arch.h Batch; every run's state a
// Ds4State): each layer's attention per sequence (its caches and positions), the mHC sites, the
// MoE (routed experts grouped by expert over all rows) and the head over the whole batch (a run's
// SeqKnobs: its expert drop per row in the MoE, its indexer top-k in its attention); the
// first run's state lends its scratch. logits: [out_rows][n_vocab].
// Every projection (run_linear) and each layer's attention core (run_sparse_attention) run on dw's
// device, waited for; the rest on the host with pool. Every state's caches live on that device.
Status ds4_forward(const Ds4Params& p, const Ds4Weights& w, const Ds4DeviceWeights& dw, const Batch& b,
                   float* logits, ThreadPool& pool);

}  // namespace strata::ds4
