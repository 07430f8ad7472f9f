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
// loading is predicted cheaper. Not thread-safe (KvPool serializes).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "base/status.h"
#include "kv/kv_disk_tier.h"
#include "kv/kv_ram_tier.h"

namespace strata {

enum class KvTier { pool, ram, disk, none };

struct KvSpillStats {
  bool ram_on = false, disk_on = false;
  uint64_t ram_budget = 0;
  int64_t ram_blocks = 0, disk_blocks = 0;
  uint64_t ram_bytes = 0, disk_bytes = 0;
  uint64_t ram_hits = 0, disk_hits = 0;  // blocks loaded back into the pool from each tier
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
};

struct KvSpillOptions {
  uint64_t ram_bytes = 0;  // 0: no RAM tier
  std::string dir;         // "": no SSD tier
};

class KvSpill {
 public:
  static Result<std::unique_ptr<KvSpill>> create(const KvSpillOptions& o, const KvBlockFormat& f);
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
  void set_last_measured(double s) { s_.last_measured_s = s; }
  bool has_disk() const { return disk_ != nullptr; }
  // Writes r to SSD (persistence at shutdown); nothing without an SSD tier.
  Status persist(const KvBlockRecord& r);
  Status persist_ram();  // every RAM entry to SSD
  KvSpillStats stats() const;
  const KvDiskTier* disk() const { return disk_.get(); }

 private:
  KvSpill() = default;
  void to_disk(const KvBlockRecord& r);
  std::unique_ptr<KvRamTier> ram_;
  std::unique_ptr<KvDiskTier> disk_;
  KvSpillStats s_;
  bool bw_measured_[2] = {false, false};
};

}  // namespace strata
