// KvSpill: where kv/KvPool's evicted cached blocks go, and the choice between loading one back
// and recomputing it. A block the pool evicts (its last reference gone long ago, its id needed
// for new rows) is copied out whole (every paged part's rows) to the RAM tier (--cache-ram,
// kv/kv_ram_tier.h); what the RAM tier's budget pushes out goes to the SSD tier
// (--prefix-cache-dir, kv/kv_disk_tier.h), else it is lost. The tiers are exclusive: a block is
// in the pool, in RAM or on SSD (a file stays on SSD after a load: it is content-addressed).
//
// The cost model (docs/design.md, "KV spill"): at a prefix lookup, the run of consecutive blocks
// after the pool's last hit that RAM or SSD hold is loaded when
//   Σ block bytes / measured bandwidth of its tier  <=  run tokens × measured prefill s / token,
// else recomputed (and counted). The bandwidths are measured over every load (read + copy into
// the pool) and start from priors (RAM 4 GB/s, SSD 0.5 GB/s); the prefill time per token is
// what the engine measures on prompt-only steps (observe_prefill), and while none is measured
// loading is predicted cheaper.
//
// The SSD writes are asynchronous: to_disk copies nothing more (the block's rows were copied out
// of the pool already, into the record it queues) and a writer thread writes the queued records'
// files. The queue is bounded (queue_capacity: 32 MiB of records, 4 to 1024 of them): a spill that
// finds it full waits for a
// write to finish. A queued block is found by where() (as on SSD) and fetch() serves a copy of its
// record; flush() waits until every queued block is written (persist at shutdown, the destructor).
// Otherwise not thread-safe (KvPool serializes its calls; the writer thread is internal).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>

#include "base/status.h"
#include "kv/kv_disk_tier.h"
#include "kv/kv_ram_tier.h"

namespace strata {

enum class KvTier { pool, ram, disk, none };

// The SSD writer's queue holds about this many bytes of records at most (kv/kv_spill.h).
inline constexpr uint64_t kSpillQueueBytes = uint64_t{32} << 20;

struct KvSpillStats {
  bool ram_on = false, disk_on = false;
  uint64_t ram_budget = 0, disk_budget = 0;  // disk: --prefix-cache-dir-size (0: no limit)
  int64_t ram_blocks = 0, disk_blocks = 0;
  uint64_t ram_bytes = 0, disk_bytes = 0;
  uint64_t ram_hits = 0, disk_hits = 0;  // blocks loaded back into the pool from each tier
  uint64_t queue_hits = 0;               // of disk_hits: served from the SSD write queue
  int64_t queue_blocks = 0;              // blocks waiting for (or in) an SSD write now
  uint64_t queue_waits = 0;              // spills that found the queue full and waited
  double queue_wait_s = 0;               // ... for this long in all
  int64_t disk_evicted = 0;              // SSD files deleted past the byte budget
  uint64_t write_errors = 0;             // SSD writes that failed (the block dropped)
  uint64_t spill_blocks = 0;             // blocks the pool spilled (copied out)
  double spill_s = 0;                    // the spilling thread's time for them (copy out, RAM, queue)
  uint64_t recomputed_blocks = 0;        // found in RAM / SSD, recompute predicted cheaper
  uint64_t spilled_ram_bytes = 0;        // pool -> RAM
  uint64_t spilled_disk_bytes = 0;       // RAM (or the pool, without RAM; or persist) -> SSD
  uint64_t dropped_blocks = 0;           // pushed out with no tier below
  uint64_t load_errors = 0;              // SSD files rejected on a read (recomputed instead)
  int64_t disk_ignored = 0, disk_rejected = 0;
  double ram_bw = 0, disk_bw = 0;  // bytes / s, measured (or the priors)
  double prefill_s_per_token = 0;  // 0: not measured yet
  // The last decision: predicted seconds to load and to recompute its run, and the measured
  // seconds of the load (when it loaded).
  double last_load_s = 0, last_recompute_s = 0, last_measured_s = 0;
  // Every decision: how many chose each way; of the loads, those whose measured time was at most
  // the recompute time predicted for the same run; predicted and measured load seconds summed.
  uint64_t load_decisions = 0, recompute_decisions = 0, loads_beat_recompute = 0;
  double predicted_load_s = 0, measured_load_s = 0;
};

struct KvSpillOptions {
  uint64_t ram_bytes = 0;    // 0: no RAM tier
  std::string dir;           // "": no SSD tier
  uint64_t disk_budget = 0;  // bytes of SSD files at most (0: no limit)
  bool verbose = false;      // a stderr line per cost-model decision (predicted and measured times)
  // Tests: called on the writer thread before each file is written (to hold writes pending).
  std::function<void(uint64_t hash)> before_write = {};
};

class KvSpill {
 public:
  static Result<std::unique_ptr<KvSpill>> create(const KvSpillOptions& o, const KvBlockFormat& f);
  // Blocks the SSD write queue holds at most, and their bytes of RAM (the plan bills them), for
  // blocks of this format: kSpillQueueBytes of records, at least 4 and at most 1024.
  static int queue_capacity(const KvBlockFormat& f);
  static uint64_t queue_bytes(const KvBlockFormat& f);
  ~KvSpill();  // flushes the SSD write queue
  KvSpill(const KvSpill&) = delete;
  KvSpill& operator=(const KvSpill&) = delete;
  KvTier where(uint64_t hash) const;
  // A block the pool evicted: to RAM (what RAM pushes out, to SSD), or to SSD without RAM.
  void spill(KvBlockRecord r);
  // The block of this content from the tier that holds it (taken out of RAM); nullopt when none
  // holds it or an SSD file fails its checks (logged, counted).
  std::optional<KvBlockRecord> fetch(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  // The cost model over a run of blocks found in RAM / SSD: true = load them.
  bool load_cheaper(int64_t ram_blocks, int64_t disk_blocks, int64_t tokens, uint64_t block_bytes);
  void observe_load(KvTier tier, uint64_t bytes, double seconds);
  void observe_prefill(int64_t tokens, double seconds);
  void count_recomputed(int64_t blocks) { s_.recomputed_blocks += static_cast<uint64_t>(blocks); }
  // The load the last decision chose took `seconds` for `blocks` blocks (logged when verbose).
  void set_last_measured(double seconds, int64_t blocks);
  // The spilling thread spent `seconds` on `blocks` evicted blocks (KvPool::spill_evicted).
  void observe_spill(int64_t blocks, double seconds);
  bool has_disk() const { return disk_ != nullptr; }
  // Queues r for SSD (persistence at shutdown); nothing without an SSD tier.
  void persist(KvBlockRecord r);
  void persist_ram();  // every RAM entry to SSD
  // Waits until every queued block is written; an error counts the writes that failed since the
  // last flush and names the first.
  Status flush();
  KvSpillStats stats() const;
  // The SSD tier (its messages, counts): read it while no spill runs (the writer adds files).
  const KvDiskTier* disk() const { return disk_.get(); }

 private:
  KvSpill() = default;
  void to_disk(KvBlockRecord r, bool count_drop = true);
  void writer();  // the writer thread's loop
  std::unique_ptr<KvRamTier> ram_;
  std::unique_ptr<KvDiskTier> disk_;
  KvSpillStats s_;
  bool bw_measured_[2] = {false, false};
  // The SSD write queue; qmu_ guards it, disk_ and s_'s disk fields (the writer thread's).
  mutable std::mutex qmu_;
  std::condition_variable work_, room_, idle_;
  std::deque<uint64_t> queue_;                           // hashes to write, oldest first
  std::unordered_map<uint64_t, KvBlockRecord> pending_;  // queued or being written
  size_t capacity_ = 0;                                  // queue_capacity
  bool stop_ = false;
  uint64_t failed_ = 0;      // writes failed since the last flush
  std::string first_error_;  // ... the first one's message
  std::function<void(uint64_t)> before_write_;
  bool verbose_ = false;
  int64_t last_ram_ = 0, last_disk_ = 0;  // the last decision's run
  std::thread thread_;
};

}  // namespace strata
