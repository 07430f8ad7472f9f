// The Architecture interface: one implementation per file (arch_<name>.cpp), found by its
// `general.architecture` name in the registry (arch.cpp).
//
// An Architecture binds its weights at load (immutable afterwards, shared by sessions) and
// makes per-sequence ArchState objects: the caches (kv/KvCache with whatever parts each layer
// needs) and the preallocated scratch of a step. forward() evaluates a Batch: runs of consecutive
// positions of any number of sequences — prefill and decode, alone or together, are the same call.
// The residual layout is the architecture's business (one row per token for the standard
// decoders, 4 hyper-connection streams per token for deepseek4): nothing outside the arch
// file assumes a shape for it.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/thread_pool.h"
#include "format/gguf.h"
#include "kv/kv_spec.h"
#include "memory/engram/engram_store.h"
#include "memory/experts/expert_source.h"
#include "memory/experts/expert_store.h"
#include "model/hparams.h"

namespace strata {

struct Batch;
class ArchState;
class BlockTable;        // kv/block_pool.h
class KvPool;            // kv/kv_pool.h
class SafetensorsDir;    // format/safetensors_dir.h
class TieredEngramRows;  // model/engram_tiered.h

struct StateOptions {
  int n_ctx = 0;    // max positions of the sequence
  int n_batch = 0;  // max tokens per forward() when this state's scratch serves the step
  int n_threads = 1;
  KvTypes kv = {};  // the caches' element types (kv/kv_type.h); an architecture that cannot use them fails
  ExpertSource* experts = nullptr;  // routed experts from a tiered store; null: the mmapped tensors
  // The device the architecture was placed on (Architecture::place): where the caches of the
  // layers it runs live. Null: host memory (an architecture not behind the seam).
  Device* device = nullptr;
  // Borrow this state's step scratch instead of allocating one (a state of the same architecture,
  // n_ctx and n_batch): states whose batches never run at the same time — an engine's slots —
  // share one scratch, which the first run's state lends to each step. Null: own scratch.
  const ArchState* share_scratch = nullptr;
  // The paged KV pool of an engine (kv/kv_pool.h, on `device`, made from this architecture's
  // spec) the state's paged parts live in; null: its own caches. Only where paged_kv() says so.
  KvPool* kv_pool = nullptr;
};

// Bytes a state allocated, by the planner's categories (0: not reported by this architecture).
struct ArchMemory {
  uint64_t kv_cache = 0;
  uint64_t scratch = 0;
  KvTypes kv = {};  // the types the KV rows are stored in
};

// Per-sequence state (caches + the scratch of a step). Opaque outside the architecture that made it.
class ArchState {
 public:
  virtual ~ArchState() = default;
  // Forget the sequence; keep allocations. Rows of the caches are overwritten before reuse.
  virtual void reset() {}
  virtual ArchMemory memory() const { return {}; }
  // A state over a KV pool: its block table (the engine reserves blocks before a step); else null.
  virtual BlockTable* kv_blocks() { return nullptr; }
  // Over a pool that keeps window-ring checkpoints (kv/kv_checkpoints.h): save one for the first
  // n_past positions; write the one of an adopted prefix of n positions back. Else nothing.
  virtual Status save_checkpoint(int64_t /*n_past*/) { return {}; }
  virtual Status restore_checkpoint(int64_t /*n*/) { return {}; }
};

// Per-sequence knobs of the forward (a request's profile, runtime/profile.h): they change only
// their own sequence's rows, never a neighbour's. The defaults change nothing (bit-identical to a
// forward without knobs).
struct SeqKnobs {
  // > 0: a token's routed experts whose router weight is below this fraction of the mean weight
  // of a choice (1/k of the k weights' sum) are not run (its heaviest always is); the kept
  // weights are rescaled to the sum of all k (model/blocks/moe.h).
  float expert_min_share = 0.0f;
  // In (0, 1): DeepSeek sparse attention (deepseek4's lightning indexer, deepseek_v41's index
  // sources) keeps this fraction of the model's indexer top-k compressed entries per query (rounded
  // up, at least 1): fewer keys read, a coarser attention. 0 (or >= 1): the model's top-k. Other
  // architectures ignore it.
  float index_topk_share = 0.0f;
  // The indexer top-k this sequence uses for a model whose top-k is model_topk.
  int64_t index_topk(int64_t model_topk) const;
  bool operator==(const SeqKnobs&) const = default;
  bool is_default() const { return *this == SeqKnobs{}; }
  // Mixed into the prefix cache's block hashes: rows computed under other knobs are other rows.
  uint64_t salt() const;
};

// One run of a batch: n consecutive tokens of one sequence, rows t0 .. t0+n-1 of the batch, at
// positions pos0 .. pos0+n-1 of the sequence whose caches are `state` (pos0 = positions it holds).
struct SeqRun {
  ArchState* state = nullptr;
  int64_t pos0 = 0;
  int64_t t0 = 0;
  int64_t n = 0;
  SeqKnobs knobs = {};
};

// A batch as an architecture sees it (built and checked by Model::forward from a TokenBatch):
// tokens of any number of sequences, one run per sequence, runs in row order covering every row;
// out_rows: the rows whose logits are wanted, ascending.
struct Batch {
  std::span<const int32_t> tokens;    // [n], ids already validated against n_vocab
  std::span<const SeqRun> runs;       // distinct states
  std::span<const int32_t> out_rows;  // logits: [out_rows.size()][n_vocab], row k for out_rows[k]
  int64_t n() const { return static_cast<int64_t>(tokens.size()); }
  // Per row, its run's knobs.expert_min_share into out[n()]; false (out untouched) when every
  // run's is 0 (the MoE block then takes no per-row weights at all).
  bool expert_min_shares(float* out) const;
};

class Architecture {
 public:
  virtual ~Architecture() = default;
  virtual const HParams& hparams() const = 0;

  // The KV parts of one sequence (kv/kv_spec.h): what new_state's caches allocate, what the plan prices.
  virtual KvSpec kv_spec() const = 0;
  // The KV parts a state made with these KV types (StateOptions::kv) holds: a tool's default that
  // the architecture or its device cannot store falls back to f32; a type asked for that it cannot
  // store is an error naming both. This default: caches of f32 only.
  virtual Result<KvSpec> kv_spec_for(const KvTypes& types) const {
    STRATA_TRY(kv_types_f32_only(types, hparams().arch.c_str()));
    return kv_spec();
  }
  virtual Result<std::unique_ptr<ArchState>> new_state(const StateOptions& opts) const = 0;
  // new_state accepts StateOptions::kv_pool (the standard decoders; not yet deepseek4 / V4.1).
  virtual bool paged_kv() const { return false; }

  // Puts the weights of the layer ops it runs through the device seam (kernels/device.h) on
  // `dev` (which outlives the architecture): called once, after load, before any state is made
  // (Model::load does). The standard decoders run attention, dense FFNs and the output head on
  // it; deepseek4 its dense projections (run_linear); deepseek_v41 does not use the seam yet and
  // ignores it (the default).
  virtual Status place(Device& dev) {
    (void)dev;
    return {};
  }

  // The one forward: prefill and decode, one sequence or many, mixed. The first run's state
  // lends its scratch to the step. Each sequence's logits and cache rows are bit-identical
  // whatever else shares the batch and however its tokens were split into batches (within one
  // ISA and any thread count): kernels/ and the blocks compute every row with the same arithmetic.
  // PRECOND (checked by Model::forward): 1 <= n <= runs[0].state's n_batch, every run's
  // pos0 + n <= its n_ctx and continues its sequence, ids < n_vocab.
  // pool: the host's threads (the MoE loop's host experts, deepseek4 / V4.1); the ops placed on a
  // device run on that device's.
  virtual Status forward(const Batch& b, float* logits, ThreadPool& pool) const = 0;
};

// One sequence through the one forward: tokens at pos0.. of st (logits [n][n_vocab] when
// all_logits, else the last row), for tests that hold an ArchState (Model::forward builds batches
// from sessions).
Status forward_one(const Architecture& arch, ArchState& st, std::span<const int32_t> tokens, int64_t pos0,
                   bool all_logits, float* logits, ThreadPool& pool);

// Where an architecture's checkpoint comes from: a GGUF file (found by general.architecture), or
// a checkpoint directory — config.json + *.safetensors (+ whatever the architecture reads beside
// them) — found by the entry whose `matches` accepts its config.json.
enum class ArchSource { gguf, checkpoint_dir };

using ArchFactory = Result<std::unique_ptr<Architecture>> (*)(const GgufFile& f);
// The architecture's KV spec from the file's metadata alone (no tensor is bound): what
// make(f)->kv_spec() returns, for the planner to price before loading.
using ArchKvSpecFn = Result<KvSpec> (*)(const GgufFile& f);

// Checkpoint directories. Options a directory architecture may use (the others stay GGUF-only).
struct DirLoadOptions {
  EngramStoreOptions engram;  // Engram tables: budget_bytes > 0 a tiered store, 0 resident
  bool v41_oracle = false;    // DeepSeek-V4.1: the reference's exact numerics (slow) instead of fast
  // Routed experts (Model's LoadOptions): budget_bytes > 0 streams them from the shards through the
  // tiered store; expert_stats a store without a budget (statistics only).
  ExpertStoreOptions experts;
  bool expert_stats = false;
};
// What a directory factory hands the Model: the architecture and what must outlive it.
struct DirModel {
  std::unique_ptr<Architecture> arch;
  std::unique_ptr<SafetensorsDir> dir;       // keeps the shards mapped
  std::unique_ptr<TieredEngramRows> engram;  // the Engram store the forward reads (null: none / resident)
  std::unique_ptr<ExpertStore> experts;      // the expert store (DirLoadOptions' expert options; null: none)
  DirModel();
  DirModel(DirModel&&) noexcept;
  DirModel& operator=(DirModel&&) noexcept;
  ~DirModel();
};
using DirMatchFn = bool (*)(const nlohmann::json& config);  // config.json names this architecture
using DirFactory = Result<DirModel> (*)(const std::string& dir, const DirLoadOptions& o);
// The KV spec from config.json's text alone (`source` names it in errors): what make_dir(...)
// ->arch->kv_spec() returns, for `strata plan --config` / `inspect --kv`.
using DirKvSpecFn = Result<KvSpec> (*)(const std::string& config_text, const std::string& source);

struct ArchEntry {
  const char* name;  // general.architecture (GGUF) or hparams().arch (directory)
  ArchSource source;
  ArchFactory make = nullptr;  // gguf
  ArchKvSpecFn kv_spec = nullptr;
  DirMatchFn matches = nullptr;  // checkpoint_dir
  DirFactory make_dir = nullptr;
  DirKvSpecFn kv_spec_config = nullptr;
};

// All architectures strata knows (arch.cpp). Adding one = one file + one line in arch.cpp.
std::span<const ArchEntry> arch_registry();
// The entry of that name and source (null: none).
const ArchEntry* arch_find(std::string_view name, ArchSource source = ArchSource::gguf);
// The names of the entries of one source, comma separated (for error messages).
std::string arch_names(ArchSource source);
// The KV spec of a GGUF of a registered architecture (an error names an unknown one).
Result<KvSpec> arch_kv_spec(const GgufFile& f);

// True if `path` is a directory holding config.json (a checkpoint directory, not a GGUF).
bool is_checkpoint_dir(const std::string& path);
// The directory entry whose `matches` accepts this config.json (parsed JSON object); null: none.
const ArchEntry* arch_find_config(const nlohmann::json& config);
// The same from config.json's text: errors name `source` — not a JSON object, or no known
// architecture (listing the directory architectures).
Result<const ArchEntry*> arch_find_config_text(const std::string& config_text, const std::string& source);

// Factories (one per arch_<name>.cpp).
Result<std::unique_ptr<Architecture>> make_arch_qwen3moe(const GgufFile& f);
Result<std::unique_ptr<Architecture>> make_arch_llama(const GgufFile& f);
Result<std::unique_ptr<Architecture>> make_arch_qwen2moe(const GgufFile& f);
Result<std::unique_ptr<Architecture>> make_arch_gpt_oss(const GgufFile& f);
Result<KvSpec> kv_spec_qwen3moe(const GgufFile& f);
Result<KvSpec> kv_spec_llama(const GgufFile& f);
Result<KvSpec> kv_spec_qwen2moe(const GgufFile& f);
Result<KvSpec> kv_spec_gpt_oss(const GgufFile& f);
bool matches_deepseek_v41(const nlohmann::json& config);
Result<DirModel> make_arch_deepseek_v41(const std::string& dir, const DirLoadOptions& o);
Result<KvSpec> kv_spec_deepseek_v41(const std::string& config_text, const std::string& source);

}  // namespace strata
