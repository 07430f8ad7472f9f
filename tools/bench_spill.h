// strata bench --spill P: the prefix cache's spill tiers through the serving engine (one slot, the
// KV pool flags of serve: --kv-budget, -cram, --prefix-cache-dir, --prefix-cache-dir-size). A
// P-token prompt (+ 4) is prefilled (TTFT: recompute), sent again (TTFT: a pool hit), then another
// prompt of the same length evicts its blocks (they spill to RAM / SSD), and the first comes back
// (TTFT: loaded from the tier that holds them, or recomputed if the cost model says so). Reported:
// the three TTFTs, blocks spilled and the scheduler thread's time per spilled block (copy out, RAM
// tier, SSD queue; the SSD write runs on the writer thread), queue waits, loads per tier and the
// cost model's decisions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "model/model.h"
#include "runtime/engine.h"

namespace strata::cli {

struct SpillBenchResult {
  int n_prompt = 0, n_ctx = 0;
  double ttft_recompute_s = 0, ttft_pool_s = 0, ttft_back_s = 0;
  int n_cached_back = 0;  // prompt tokens the third run took from the cache (pool + tiers)
  KvPoolStats kv;         // after the third run
};

// eo: the KV pool flags applied (KvPoolFlags::apply); n_slots, manual_step are set here.
Result<SpillBenchResult> spill_bench(const Model& m, int n_prompt, EngineOptions eo, const KvTypes& kv = {},
                                     const SeqKnobs& knobs = {});
std::string spill_bench_text(const SpillBenchResult& r);
nlohmann::json spill_bench_json(const SpillBenchResult& r);

}  // namespace strata::cli
