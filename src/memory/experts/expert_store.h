// The tiered expert store: routed experts live in a fast tier of equal-size slots with an exact
// byte budget (memory/tier.h) and are read on demand from the backing file without the page cache
// (memory/io_file.h) by an I/O engine (memory/io_engine.h: io_uring, a pool of pread threads, or the
// compute thread itself with blocking preads: "sync"). The backing file is the GGUF itself (three
// reads per expert: gate, up, down covers), a `strata pack` bundle given as
// ExpertStoreOptions::expert_file (one read per expert), or a checkpoint directory's shards (each
// expert part's tensors, FP4 ones transformed to MXFP4 in the slot once read: the I/O thread runs
// ExpertCatalog::transform before the slot is ready; expert_store_catalog.h).
//
//   (layer, expert) ──map──► slot ──state──► free | filling | ready | failed
//
// Rules: a pinned slot (acquired, not yet released) and a slot being filled are never evicted;
// the policy (memory/expert_policy.h) picks victims among the rest; a miss issues a read and the
// compute thread waits (its stall time is recorded). With prefetch on, on_route() starts the
// reads for the layer's missing experts at once (they then load in parallel while resident ones
// compute; they go to the engine as one submission per layer) and, on decode steps, applies the next
// `lookahead` layers' routers to the current hidden state to prefetch what they will probably want into free
// or evictable slots (memory/prefetch.h), never evicting an expert the current layer selected or a prefetch
// not yet used.
//
// With --expert-profile the store warm-starts: open() reads the profile's hottest experts into the
// slots (hottest first, up to every slot), so a run starts with its hot set resident and the
// policy (lfu / adaptive seeded with the profile's counts, static with its hot set) keeps it.
//
// With budget_bytes == 0 the store is "resident": experts are served from the mapped file and
// only statistics / routing traces are recorded. Thread-safety: one compute thread calls the
// ExpertSource methods; I/O threads complete reads concurrently.
#pragma once

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "memory/experts/expert_policy.h"
#include "memory/experts/expert_source.h"
#include "memory/experts/expert_stats.h"
#include "memory/experts/expert_store_catalog.h"
#include "memory/io/io_file.h"
#include "memory/io/io_engine.h"
#include "memory/experts/prefetch.h"
#include "memory/tier/tier.h"

namespace strata {

struct ExpertStoreOptions {
  uint64_t budget_bytes = 0;  // fast-tier bytes for routed experts; 0 = all resident (mmapped)
  std::string policy = "adaptive";
  bool prefetch = true;   // off = "naive": reads start only when compute asks, one at a time
  int lookahead = 1;      // layers ahead the router look-ahead predicts (prefetch on)
  int lookahead_top = 0;  // prefetch only the look-ahead's best `lookahead_top` of top-k (0: all k)
  // What predicts layer l+d's experts while layer l computes (decode steps): "lookahead" (the next
  // routers on this layer's input), "history" (the previous token's experts at l+d) or "union".
  std::string predict = "lookahead";
  int io_threads = 4;  // threads backend: reader threads
  int io_depth = 32;   // uring: raw reads in flight; both: max prefetches queued or in flight
  // auto (uring when it can be set up, else threads) | uring | threads | sync (the compute thread
  // reads its own misses, one blocking pread at a time: the naive baseline)
  std::string io_backend = "auto";
  std::string expert_file;  // a `strata pack` bundle of this GGUF to read experts from
  // Split each expert read into pieces of at most this many bytes, read in parallel by the uring
  // engine (memory/io_engine.h io_split_segments); 0: one read per part (GGUF) or per expert (bundle).
  size_t io_chunk = 0;
  bool direct_io = true;  // O_DIRECT (falls back to buffered + DONTNEED where refused)
  // With a budget: copy the dense weights out of the mapping into anonymous RAM, read with O_DIRECT
  // (memory/mem_resident.h), so that they are resident and counted whatever the page cache does.
  bool dense_resident = true;
  std::string profile_path;        // --expert-profile: seeds counts and the static hot set
  std::string routing_trace_path;  // --routing-trace-out: one JSON line per (token, layer)
  // In-memory routing observer, called beside the trace on every routed layer of every step:
  // token0 = the logical index (as the trace's token_idx) of the step's first token, sel = [n][k]
  // chosen experts in router order. `strata kld` reads routing consistency through it.
  std::function<void(uint64_t token0, int layer, int64_t n, const int32_t* sel, int k)> on_route;
};

using IoOpener = std::function<Result<std::unique_ptr<IoFile>>(const std::string& path, bool direct)>;

// What a store serves experts from, made by the model's loader: where each expert's bytes are
// (ExpertCatalog::build for a GGUF, build_safetensors for a checkpoint directory), the routers
// the look-ahead applies (null: prefetch without look-ahead), and, with a budget, what becomes of
// the dense weights (a GGUF's: read into anonymous RAM; returns the bytes loaded; null: nothing).
struct ExpertBacking {
  ExpertCatalog catalog;
  std::unique_ptr<RouterLookahead> routers;
  std::function<Result<uint64_t>()> prepare_dense;
};

class ExpertStore final : public ExpertSource {
 public:
  // n_layer / n_expert / n_used from the model's hyper-parameters. policy may be null only when
  // budget_bytes == 0. opener defaults to io_open_file (tests inject faults through it).
  // Errors: no expert tensors, a budget below one layer's top-k (message gives the minimum), I/O.
  static Result<std::unique_ptr<ExpertStore>> open(const GgufFile& f, int n_layer, int n_expert, int n_used,
                                                   const ExpertStoreOptions& o,
                                                   std::unique_ptr<ExpertPolicy> policy,
                                                   IoOpener opener = nullptr);
  // The same over any backing (n_layer / n_expert from its catalog); the GGUF open above is this
  // with the GGUF's catalog (and bundle), routers and dense weights.
  static Result<std::unique_ptr<ExpertStore>> open(ExpertBacking b, int n_used, const ExpertStoreOptions& o,
                                                   std::unique_ptr<ExpertPolicy> policy,
                                                   IoOpener opener = nullptr);
  ~ExpertStore() override;

  // ExpertSource
  void begin_step(int64_t n_tokens) override;
  void end_step() override;
  void on_route(int layer, const float* x, int64_t n, const int32_t* sel, const float* wts, int k) override;
  Result<ExpertViews> acquire(int layer, int expert) override;
  void release(int layer, int expert) override;
  bool ready(int layer, int expert) const override { return is_resident(layer, expert); }
  int wait_any(int layer, const int32_t* experts, int n) override;

  const ExpertStoreInfo& info() const { return info_; }
  const ExpertCatalog& catalog() const { return catalog_; }
  // Snapshot of the statistics (locks; call between steps for consistent numbers).
  ExpertStats stats() const;
  ExpertTotals totals() const;  // stats().totals() without copying the per-expert counts (any thread)
  // Writes the statistics: .csv → per-(layer, expert) counts, else JSON.
  Status write_stats(const std::string& path) const;
  // Writes the activation profile (counts loaded from --expert-profile plus this run's).
  Status save_profile(const std::string& path) const;
  // Measured memory (the report next to the plan): routed-expert bytes resident now (the tier's
  // touched pages; resident mode: the expert tensors' pages of the mapping) and the I/O engine's
  // own allocations.
  uint64_t expert_resident_bytes() const;
  uint64_t io_overhead_bytes() const { return io_ ? io_->overhead_bytes() : 0; }
  // Bytes of dense weights copied into anonymous RAM at open (0: they are served from the mapping).
  uint64_t dense_loaded_bytes() const { return dense_loaded_; }
  // Number of slots holding a ready expert / being filled (tests).
  int resident_count() const;
  bool is_resident(int layer, int expert) const;

 private:
  enum class SlotState : uint8_t { slot_free, slot_filling, slot_ready, slot_failed };
  struct Slot {
    ExpertKey key{-1, -1};
    SlotState state = SlotState::slot_free;
    int pins = 0;
    bool prefetched = false;  // filled by look-ahead and not used yet
    bool transient = false;   // not admitted by the policy: first to go
    bool urgent = false;
    Status error;
  };

  ExpertStore() = default;
  size_t idx(int layer, int expert) const {
    return static_cast<size_t>(layer) * static_cast<size_t>(n_expert_) + expert;
  }
  // Reads the profile's hottest experts (up to every slot) before the first token; see open().
  Status warm_start();
  // I/O completion of slot s's read (engine thread).
  void read_done(uint32_t s, const Status& st, uint64_t bytes, double seconds);
  // Hands the reads started since the last flush to the engine, urgent ones first, one call each;
  // the time the compute thread spends in it is stall (all of it with the sync engine, which reads
  // there). Compute thread only, mu_ not held.
  void flush();
  void add_stall_locked(double seconds);
  // on_route's work under mu_: statistics, the layer's misses and the look-ahead started.
  void route_locked(int layer, const float* x, int64_t n, const int32_t* sel, const float* wts, int k);
  // A slot for a new expert: free, or an evicted victim (never pinned, never filling). level 0
  // also spares experts predicted for the next layers and unused prefetches, and level <= 1 the
  // experts the current layer selected; level 2 only pinned and filling slots. -1 when none can
  // be taken now. Caller holds mu_.
  int take_slot_locked(int level);
  void evict_locked(int slot);
  void start_fill_locked(int slot, ExpertKey k, bool urgent, bool prefetch);
  void prefetch_locked(int layer, const float* x, int64_t n);
  // The slot holds an expert the next layers will probably want (predicted, or prefetched for
  // a layer not computed yet).
  bool upcoming_locked(const Slot& slot) const;
  void write_trace_locked(int layer, int64_t n, const int32_t* sel, const float* wts, int k);

  ExpertCatalog catalog_;
  ExpertStoreOptions opts_;
  ExpertStoreInfo info_;
  int n_layer_ = 0, n_expert_ = 0, n_used_ = 0;
  bool resident_ = true;
  std::unique_ptr<ExpertPolicy> policy_;
  std::unique_ptr<FastTier> tier_;
  std::vector<std::unique_ptr<IoFile>> files_;          // catalog_.backing_files(), opened
  std::vector<IoJob> pending_urgent_, pending_normal_;  // started, not yet handed to the engine
  std::unique_ptr<RouterLookahead> lookahead_;
  FILE* trace_ = nullptr;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  std::vector<int32_t> slot_of_;  // [n_layer][n_expert] → slot or -1
  std::vector<int32_t> free_;     // free slot indices
  std::vector<uint8_t> cur_sel_;  // [n_expert]: selected by the layer being computed
  int cur_layer_ = -1;
  std::vector<uint8_t> pred_;        // [n_layer][n_expert]: look-ahead prediction per layer
  std::vector<uint8_t> pred_valid_;  // [n_layer]
  std::vector<int64_t> last_use_;    // [n_layer][n_expert]: last token that selected it, -1 never
  bool predict_lookahead_ = true, predict_history_ = false;
  std::vector<uint8_t> mark_;                   // [n_expert] scratch
  std::vector<std::vector<int32_t>> la_trace_;  // this layer's look-ahead predictions, for the trace
  std::vector<ExpertKey> cand_keys_;
  std::vector<int32_t> cand_slots_;
  int prefetch_inflight_ = 0;
  bool warming_ = false;           // warm_start() under way: reads and submit time are not per-token numbers
  uint64_t tick_ = 0, tick0_ = 0;  // tokens seen; first token of the current step
  uint64_t dense_loaded_ = 0;
  std::vector<uint64_t> profile_counts_;
  ExpertStats stats_;

  std::unique_ptr<IoEngine> io_;  // last: its threads stop before anything above is destroyed
};

// ExpertStore::open with the policy made by make_expert_policy(o.policy) (static: hot set from
// o.profile_path, hottest first).
Result<std::unique_ptr<ExpertStore>> expert_store_open(const GgufFile& f, int n_layer, int n_expert,
                                                       int n_used, const ExpertStoreOptions& o);
Result<std::unique_ptr<ExpertStore>> expert_store_open(ExpertBacking b, int n_used,
                                                       const ExpertStoreOptions& o);

}  // namespace strata
