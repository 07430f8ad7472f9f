// strata bench -npl: llama-batched-bench's measurement of one model — for each count B of parallel
// sequences, B prompts of npp tokens prefilled in one batch (PP), then ntg steps that decode one token
// of every sequence in one batch (TG) — through Model::forward, the engine's one forward.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "runtime/engine.h"

namespace strata::cli {

struct BatchedBenchRow {
  int npp = 0, ntg = 0, npl = 0;
  double t_pp = 0, t_tg = 0;      // seconds (median of the repetitions)
  std::optional<KvPoolStats> kv;  // the paged pool at the end of the last repetition
  double s_pp() const { return t_pp > 0 ? double(npp) * npl / t_pp : 0; }
  double s_tg() const { return t_tg > 0 ? double(ntg) * npl / t_tg : 0; }
};

// One warm-up, then reps timed runs per npl; rows in npl order. paged: the sequences' KV in a pool
// made with these options (budget, block size, ...; one sequence per slot) as the engine's, for
// architectures with paged KV; null: contiguous sessions.
Result<std::vector<BatchedBenchRow>> batched_bench(const Model& m, const std::vector<int>& npl, int npp,
                                                   int ntg, int reps, const KvTypes& kv = {},
                                                   const SeqKnobs& knobs = {},
                                                   const EngineOptions* paged = nullptr);
std::string batched_bench_table(const std::vector<BatchedBenchRow>& rows);
nlohmann::json batched_bench_json(const std::vector<BatchedBenchRow>& rows);

}  // namespace strata::cli
