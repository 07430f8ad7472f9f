// Expert-store statistics: per forward step (= per token in decode) hits, misses, bytes read and
// stall time; totals including prefetch precision / recall and wasted bytes; per-(layer, expert)
// activation counts. Exported as JSON (`--stats-out FILE.json`) or CSV (`FILE.csv`), and as the
// activation profile `--expert-profile` loads to seed the static policy's hot set.
//
// Counting rules (one "access" = one distinct (step, layer, expert) the router selected):
//   hit   the expert was resident and ready when its layer routed
//   late  a read for it was already in flight (a prefetch that had not finished)
//   miss  it was not resident: a read had to start
// activation counts are per (token, layer, expert), as the routing trace has them.
// Memory is bounded: per-step records are kept in a ring of the last kStepRing steps; totals (all
// steps, and decode steps alone) are cumulative counters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/text_file.h"  // write_text_file: the stats / profile writers
#include "memory/experts/expert_policy.h"

namespace strata {

struct ExpertStepStats {
  int64_t token0 = 0;    // logical index of the step's first token
  int64_t n_tokens = 0;  // tokens in the step
  uint32_t hits = 0, late = 0, misses = 0;
  uint64_t bytes_read = 0;
  double stall_s = 0.0;  // time compute waited for expert reads
};

struct ExpertTotals {
  int64_t tokens = 0, steps = 0;
  uint64_t hits = 0, late = 0, misses = 0;
  uint64_t reads = 0, bytes_read = 0;  // completed expert reads (demand + prefetch)
  uint64_t read_errors = 0;
  double stall_s = 0.0;
  double read_s = 0.0;  // summed read time of all completed reads (across I/O threads)
  uint64_t evictions = 0;
  uint64_t prefetch_issued = 0, prefetch_used = 0, prefetch_wasted = 0;
  uint64_t prefetch_wasted_bytes = 0;
  // Router look-ahead prediction quality, over (layer, expert) sets: predicted vs actual.
  uint64_t pred_true_pos = 0, pred_false_pos = 0, pred_false_neg = 0;
  // Calls into the I/O engine and the reads they carried (a layer's misses go in one call).
  uint64_t io_submits = 0, io_jobs = 0;

  uint64_t accesses() const { return hits + late + misses; }
  double hit_rate() const { return accesses() ? static_cast<double>(hits + late) / accesses() : 0.0; }
  double prefetch_precision() const;
  double prefetch_recall() const;
  // The counts accumulated since `earlier`, a snapshot of the same totals (bench: the timed
  // repetitions without the warm-up).
  ExpertTotals since(const ExpertTotals& earlier) const;
};

// Static facts of the store, printed with the numbers.
struct ExpertStoreInfo {
  std::string backing_path;
  std::string policy;
  std::string tier = "ram";
  bool direct_io = false;
  bool prefetch = false;
  bool resident = false;  // no budget: every expert served from the mapping
  int n_layer = 0, n_expert = 0, n_used = 0;
  int n_slots = 0;
  uint64_t slot_bytes = 0, budget_bytes = 0, tier_bytes = 0;
  uint64_t routed_bytes = 0, dense_bytes = 0;
  int io_threads = 0, io_depth = 0, lookahead = 0;
  std::string io_backend;          // "uring" | "threads" (empty when resident)
  std::string expert_file;         // the pack bundle read from, or empty (the GGUF)
  uint64_t io_overhead_bytes = 0;  // the I/O engine's own allocations (rings, queues, stacks)
  // Warm start (--expert-profile): the profile's hottest experts read before the first token; not
  // part of the per-token statistics.
  int warm_experts = 0;
  uint64_t warm_bytes = 0;
  double warm_seconds = 0.0;
};

class ExpertStats {
 public:
  void init(int n_layer, int n_expert);
  void count_activation(int layer, int expert) { ++counts_[static_cast<size_t>(layer * n_expert_ + expert)]; }
  void add_activation(int layer, int expert, uint64_t n) {
    counts_[static_cast<size_t>(layer * n_expert_ + expert)] += n;
  }
  uint64_t activation(int layer, int expert) const {
    return counts_[static_cast<size_t>(layer * n_expert_ + expert)];
  }
  int n_layer() const { return n_layer_; }
  int n_expert() const { return n_expert_; }

  static constexpr size_t kStepRing = 4096;

  ExpertStepStats& begin_step(int64_t token0, int64_t n_tokens);
  ExpertStepStats* current() { return n_steps_ ? &ring_[(n_steps_ - 1) % ring_.size()] : nullptr; }
  // The last min(steps, kStepRing) steps, oldest first.
  std::vector<ExpertStepStats> steps() const;
  uint64_t steps_dropped() const { return n_steps_ > ring_.size() ? n_steps_ - ring_.size() : 0; }
  // hits / late / misses / bytes_read / stall_s / tokens / steps summed over every decode step
  // (one token), including the current one: the tg numbers.
  ExpertTotals decode_totals() const;
  ExpertTotals& totals() { return totals_; }
  const ExpertTotals& totals() const { return totals_; }

  // JSON: {"info":{...},"totals":{...},"steps":[...],"activations":[[...] per layer]}.
  std::string to_json(const ExpertStoreInfo& info) const;
  // CSV: layer,expert,count (one row per pair; the profile format too).
  std::string to_csv() const;
  // By extension: .csv → CSV, anything else → JSON. Error names the path.
  Status write(const std::string& path, const ExpertStoreInfo& info) const;

 private:
  int n_layer_ = 0, n_expert_ = 0;
  std::vector<uint64_t> counts_;       // [n_layer][n_expert]
  std::vector<ExpertStepStats> ring_;  // kStepRing records, written round-robin
  uint64_t n_steps_ = 0;
  ExpertTotals decode_done_;  // decode steps before the current one
  ExpertTotals totals_;
};

// Expert profiles (`--expert-profile FILE`): the CSV above. load returns the (layer, expert) keys
// with count > 0, hottest first (ties: lower layer, then lower expert) and adds the counts to
// *counts when given ([n_layer][n_expert]). Errors name the file and line.
Result<std::vector<ExpertKey>> expert_profile_load(const std::string& path, int n_layer, int n_expert,
                                                   std::vector<uint64_t>* counts = nullptr);

}  // namespace strata
