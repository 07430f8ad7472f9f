// The Architecture interface: one implementation per file (arch_<name>.cpp), found by its
// `general.architecture` name in the registry (arch.cpp).
//
// An Architecture binds its weights at load (immutable afterwards, shared by sessions) and
// makes per-session ArchState objects: the caches (kv/KvCache with whatever parts each layer
// needs) and the preallocated scratch of a step. forward() evaluates a Batch of consecutive
// positions of one sequence — prefill and decode are the same call, n is just a dimension.
// The residual layout is the architecture's business (one row per token for the standard
// decoders, 4 hyper-connection streams per token for deepseek4): nothing outside the arch
// file assumes a shape for it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "base/status.h"
#include "base/thread_pool.h"
#include "format/gguf.h"
#include "memory/expert_source.h"
#include "model/hparams.h"

namespace strata {

// Tokens of one sequence at positions pos0 .. pos0 + n - 1.
struct Batch {
  std::span<const int32_t> tokens;  // [n], ids already validated against n_vocab
  int64_t pos0 = 0;
  bool all_logits = true;  // logits of every token, else of the last one only
};

struct StateOptions {
  int n_ctx = 0;    // max positions of the sequence
  int n_batch = 0;  // max tokens per forward()
  int n_threads = 1;
  ExpertSource* experts = nullptr;  // routed experts from a tiered store; null: the mmapped tensors
};

// Bytes a state allocated, by the planner's categories (0: not reported by this architecture).
struct ArchMemory {
  uint64_t kv_cache = 0;
  uint64_t scratch = 0;
};

// Per-session state (caches + scratch). Opaque outside the architecture that made it.
class ArchState {
 public:
  virtual ~ArchState() = default;
  // Forget the sequence; keep allocations. Rows of the caches are overwritten before reuse.
  virtual void reset() {}
  virtual ArchMemory memory() const { return {}; }
};

class Architecture {
 public:
  virtual ~Architecture() = default;
  virtual const HParams& hparams() const = 0;

  virtual Result<std::unique_ptr<ArchState>> new_state(const StateOptions& opts) const = 0;

  // PRECOND (checked by Session): 1 <= n <= opts.n_batch, pos0 + n <= opts.n_ctx, positions
  // continue the sequence (pos0 = tokens already evaluated), ids < n_vocab.
  // logits: [n][n_vocab] when b.all_logits, else [n_vocab] (last token).
  virtual Status forward(ArchState& st, const Batch& b, float* logits, ThreadPool& pool) const = 0;

  // Batched decode across sequences (the engine's slots): token i is the next token of the
  // sequence in states[i] (made by this architecture, all distinct), at position pos[i]. One
  // forward for all of them, so each weight is read once per step instead of once per sequence.
  // logits: [n][n_vocab]. Each row equals what forward() gives that sequence alone (up to the
  // kernels' summation order, which may differ with the row count).
  // PRECOND (checked by Model::decode_batch): n <= every state's n_batch, pos[i] < its n_ctx.
  virtual bool can_decode_batch() const { return false; }
  virtual Status forward_decode_batch(std::span<ArchState* const> states, std::span<const int32_t> tokens,
                                      std::span<const int64_t> pos, float* logits, ThreadPool& pool) const;
};

using ArchFactory = Result<std::unique_ptr<Architecture>> (*)(const GgufFile& f);

struct ArchEntry {
  const char* name;  // general.architecture
  ArchFactory make;
};

// All architectures strata knows (arch.cpp). Adding one = one file + one line in arch.cpp.
std::span<const ArchEntry> arch_registry();
const ArchEntry* arch_find(std::string_view name);

// Factories (one per arch_<name>.cpp).
Result<std::unique_ptr<Architecture>> make_arch_qwen3moe(const GgufFile& f);
Result<std::unique_ptr<Architecture>> make_arch_llama(const GgufFile& f);
Result<std::unique_ptr<Architecture>> make_arch_qwen2moe(const GgufFile& f);
Result<std::unique_ptr<Architecture>> make_arch_gpt_oss(const GgufFile& f);

}  // namespace strata
