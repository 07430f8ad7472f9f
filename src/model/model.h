// The public face of model/: load a GGUF, then evaluate tokens through a Session.
//
//   auto model = Model::load("m.gguf", {}).value();
//   auto sess  = model->new_session({.n_ctx = 4096});
//   std::vector<float> logits(n_tokens * model->n_vocab());
//   sess->eval(tokens, logits.data(), /*all_logits=*/true);   // prefill (one batch)
//   sess->eval({next}, logits.data(), false);                  // decode, same code path
//
// A Model is immutable after load (weights are views into the mmapped file) and can serve many
// Sessions; a Session owns one sequence's caches (KV, window rings, compressor state) and the
// preallocated scratch of a step. Architectures live one per file (arch_<name>.cpp) behind the
// Architecture interface in model/arch.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"
#include "base/thread_pool.h"
#include "format/gguf.h"
#include "kv/kv_type.h"
#include "model/arch.h"
#include "memory/engram/engram_store.h"
#include "memory/experts/expert_store.h"
#include "text/tokenizer.h"

namespace strata {

struct HParams;  // model/hparams.h
class Architecture;
class Session;
class SessionImpl;       // model.cpp: the sessions a Model makes
class SafetensorsDir;    // format/safetensors_dir.h
class TieredEngramRows;  // model/engram_tiered.h
class Device;            // kernels/device.h
class BlockTable;        // kv/block_pool.h
class KvPool;            // kv/kv_pool.h
class DeviceExperts;     // memory/experts/device_experts.h
struct DeviceExpertOptions;

struct LoadOptions {
  int n_threads = 0;  // kernel thread pool size; <= 0: all cores
  // Routed experts: experts.budget_bytes > 0 streams them through a tiered store of that many
  // bytes (memory/expert_store.h); 0 keeps them all mmapped. expert_stats makes a store without
  // a budget (statistics, routing traces, profiles only).
  ExpertStoreOptions experts = {};
  bool expert_stats = false;
  // DeepSeek-V4.1 directories: engram.budget_bytes > 0 serves the Engram tables from a tiered
  // store of that many bytes (memory/engram_store.h); 0 keeps them resident with the weights.
  EngramStoreOptions engram = {};
  // DeepSeek-V4.1 directories: run the reference's exact summation orders on f32 weights (the
  // oracle the tests hold bit-exact; `--v41-numerics oracle`) instead of strata's kernels.
  bool v41_oracle = false;
  // A Hugging Face tokenizer.json to use instead of the model's own (a GGUF's tokenizer.ggml.*,
  // a checkpoint directory's tokenizer.json); a tokenizer_config.json beside it is read too.
  std::string tokenizer_path = {};
  // The device the architecture's layer ops run on (kernels/device.h; it outlives the model).
  // Null: the model's own CPU device over its thread pool.
  Device* device = nullptr;
};

class Session;
struct SessionOptions {
  int n_ctx = 0;      // max positions; <= 0: the model's training context, capped at 4096
  int n_batch = 512;  // max tokens per eval call (longer inputs are split internally)
  KvTypes kv = {};    // KV element types (-ctk / -ctv / --kv-rotate); f32 unless asked
  // A session of this model with the same n_ctx and n_batch whose step scratch this one shares
  // (an engine's slots: their batches run one at a time, so one scratch serves them all; it is
  // reference-counted). Null: own scratch. Not for sessions evaluated from concurrent threads.
  const Session* share_scratch = nullptr;
  // The engine's paged KV pool (kv/kv_pool.h, made from this model's KV spec on its device, outliving
  // the session): the session's full-attention K / V live in its blocks. Null: its own caches.
  // Only for architectures whose paged_kv() is true (the standard decoders).
  KvPool* kv_pool = nullptr;
};

// A batch as callers build it (llama.cpp's llama_batch): per token its id, the sequence it belongs
// to (an index into the sessions passed with the batch), optionally its position (must be the
// next position of that sequence: rewinding is not supported) and whether its logits are wanted.
struct TokenBatch {
  TokenBatch() = default;
  TokenBatch(std::span<const int32_t> t, std::span<const int32_t> s = {}, std::span<const int64_t> p = {},
             std::span<const uint8_t> l = {})
      : tokens(t), seq(s), pos(p), logits(l) {}
  std::span<const int32_t> tokens;
  std::span<const int32_t> seq;     // [n]; empty: every token belongs to sequence 0
  std::span<const int64_t> pos;     // [n]; empty: each sequence continues where it stands
  std::span<const uint8_t> logits;  // [n]; empty: the last token of each sequence
};

// What runs batches of sessions' tokens: a Model, or a test double. logits receives one row of
// n_vocab per wanted token, in batch order.
class BatchRunner {
 public:
  virtual ~BatchRunner() = default;
  virtual Status forward(std::span<Session* const> sessions, const TokenBatch& b, float* logits) const = 0;
  // Threads the caller of forward() may use between its forwards (the engine samples its slots on
  // them); null: none.
  virtual ThreadPool* idle_pool() const { return nullptr; }
};

class Model final : public BatchRunner {
 public:
  // `path`: a GGUF file, or a checkpoint directory with config.json (DeepSeek-V4.1 official
  // layout: *.safetensors + engram_meta.json). A directory model's tokenizer is its tokenizer.json
  // (with tokenizer_config.json); without one (and without LoadOptions::tokenizer_path) it has
  // none: token ids in, logits out. A tokenizer with more ids than the model's vocabulary is an
  // error naming both sizes.
  static Result<std::unique_ptr<Model>> load(const std::string& path, const LoadOptions& opts);
  ~Model();

  const std::string& arch_name() const;
  const HParams& hparams() const;
  bool has_gguf() const { return file_ != nullptr; }
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  const GgufFile& file() const { return *file_; }                         // has_gguf() only
  const SafetensorsDir* checkpoint_dir() const { return st_dir_.get(); }  // null: a GGUF model
  const Tokenizer& tokenizer() const { return *tokenizer_; }              // has_tokenizer() only
  int n_vocab() const;
  int n_ctx_train() const;
  ThreadPool& pool() const { return *pool_; }
  ThreadPool* idle_pool() const override { return pool_.get(); }
  Device& device() const { return *device_; }          // where the layer ops run (LoadOptions::device)
  const Architecture& arch() const { return *arch_; }  // model/arch.h
  // The tiered expert store, or null (no budget and no statistics asked for).
  ExpertStore* expert_store() const { return store_.get(); }
  // Routed experts on the model's GPU device (memory/experts/device_experts.h): copies the experts
  // o chooses into its buffers; sessions made afterwards run them there (the others on the host,
  // behind the expert store when there is one). Part of loading: before the first session. Errors:
  // a CPU device, a checkpoint directory, an expert store with a RAM budget (not combined yet), the
  // device's budget, called twice. A model without routed experts places nothing.
  Status place_experts(const DeviceExpertOptions& o);
  const DeviceExperts* device_experts() const { return gpu_experts_.get(); }  // null: none placed
  const EngramStore* engram_store() const;  // null unless loaded with engram.budget_bytes

  Result<std::unique_ptr<Session>> new_session(const SessionOptions& opts) const;
  // The KV cache bytes new_session(opts) allocates on the model's device (its context and batch
  // resolved as new_session does; the architecture's KvSpec for the types it would store).
  Result<uint64_t> session_kv_bytes(const SessionOptions& opts) const;

  // The one forward (BatchRunner): tokens of any number of these sessions in one step. Each
  // sequence's tokens must be contiguous in the batch; they are appended to its session. Batches
  // larger than the sessions' n_batch are split into steps of at most that many tokens (a split
  // changes no bits: forward is batch-invariant). Errors (nothing appended): a session of another
  // model or listed twice, a sequence index out of range or split over the batch, a position that
  // does not continue its sequence, a bad token id, a full context (names both numbers).
  Status forward(std::span<Session* const> sessions, const TokenBatch& b, float* logits) const override;

 private:
  friend class Session;
  Model() = default;
  // The device (LoadOptions::device or a CpuDevice of its own), the architecture placed on it.
  Status place(const std::string& path, const LoadOptions& opts);
  // tokenizer_ from a tokenizer.json (after arch_: checks its size against the vocabulary).
  Status load_json_tokenizer(const std::string& path, const std::string& tokenizer_json);
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<SafetensorsDir> st_dir_;  // a checkpoint directory model (file_ is null)
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Device> own_device_;  // the CPU device when LoadOptions::device is null
  Device* device_ = nullptr;
  std::unique_ptr<Architecture> arch_;          // after the device: its buffers go first
  std::unique_ptr<ExpertStore> store_;          // after file_: destroyed first
  std::unique_ptr<DeviceExperts> gpu_experts_;  // after store_ (its host side): destroyed first
  std::unique_ptr<TieredEngramRows> engram_;    // the V4.1 forward reads Engram rows through it
};

class Session {
 public:
  virtual ~Session() = default;

  // Appends `tokens` at positions n_past() .. n_past()+n-1 and evaluates them causally: a batch of
  // this sequence alone through the model's one forward (Model::forward).
  // all_logits: logits_out receives [n][n_vocab] (one row per token); else only the last
  // token's row [n_vocab]. Token ids are validated (error names the id and position).
  // Exceeding n_ctx is an error, with nothing appended.
  virtual Status eval(std::span<const int32_t> tokens, float* logits_out, bool all_logits) = 0;

  virtual int n_past() const = 0;
  virtual int n_ctx() const = 0;
  virtual void reset() = 0;  // forget the sequence, keep allocations (a paged one's blocks go back)
  // Paged sessions (SessionOptions::kv_pool): the block table the engine reserves blocks in before a
  // step (kv/KvPool::reserve); null otherwise.
  virtual BlockTable* kv_blocks() { return nullptr; }
  // After reset(), the first n positions' rows are already in the blocks the table holds (a
  // prefix the pool had cached, KvPool::adopt_prefix): the sequence continues at n (a model with
  // window parts: their rows written back from the prefix's checkpoint). Errors: not a fresh paged
  // session, fewer blocks than n positions, or no checkpoint where one is needed.
  virtual Status assume_prefix(int n) {
    (void)n;
    return err("assume_prefix: not a paged session");
  }
  // A paged session on a pool that keeps window-ring checkpoints (kv/kv_checkpoints.h): save one
  // at its last named block boundary, so that a later sequence can continue its prefix. Else nothing.
  virtual Status checkpoint() { return {}; }
  // KV cache and scratch bytes this session allocated (memory report next to the plan).
  struct Memory {
    uint64_t kv_cache = 0, scratch = 0;  // 0: not reported by the architecture
    KvTypes kv = {};                     // the element types the KV rows are stored in
  };
  virtual Memory memory() const { return {}; }
  // The sequence's knobs (model/arch.h SeqKnobs: a request's profile, runtime/profile.h), used by
  // every forward from now on; reset() keeps them.
  void set_knobs(const SeqKnobs& k) { knobs_ = k; }
  const SeqKnobs& knobs() const { return knobs_; }

 private:
  SeqKnobs knobs_;
  friend class Model;
  virtual SessionImpl* impl() { return nullptr; }  // a Model's own sessions (not test doubles)
};

}  // namespace strata
