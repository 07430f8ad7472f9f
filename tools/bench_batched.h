// strata bench -npl: llama-batched-bench's measurement of one model — for each count B of parallel
// sequences, B prompts of npp tokens prefilled in one batch (PP), then ntg steps that decode one token
// of every sequence in one batch (TG) — through Model::forward, the engine's one forward. With
// sampling (BatchedSampling) each TG token is drawn from its sequence's logits by a Sampler, under a
// grammar when one is given, as the engine samples: what a grammar adds to decode time is S_TG with
// the grammar against S_TG without it. A sequence whose grammar is done (complete, end of generation
// drawn, or nothing allowed) starts a fresh constraint, as the next request would (first-time costs
// count); its KV goes on.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/grammar.h"
#include "runtime/grammar_constraint.h"
#include "runtime/sampler.h"

namespace strata::cli {

struct BatchedBenchRow {
  int npp = 0, ntg = 0, npl = 0;
  double t_pp = 0, t_tg = 0;      // seconds (median of the repetitions)
  double t_sample = 0;            // of t_tg, the sampling (with BatchedSampling; median)
  double cpu_sample = 0;          // the sampling thread's CPU time in it (median)
  std::optional<KvPoolStats> kv;  // the paged pool at the end of the last repetition
  double s_pp() const { return t_pp > 0 ? double(npp) * npl / t_pp : 0; }
  double s_tg() const { return t_tg > 0 ? double(ntg) * npl / t_tg : 0; }
};

struct BatchedSampling {
  SamplerParams params;                       // temp <= 0: greedy
  std::shared_ptr<const Grammar> grammar;     // null: unconstrained
  std::shared_ptr<const GrammarVocab> vocab;  // with a grammar
  int restarts = 0;                           // out: constraints started again (all runs)
};

// One warm-up, then reps timed runs per npl; rows in npl order. paged: the sequences' KV in a pool
// made with these options (budget, block size, ...; one sequence per slot) as the engine's, for
// architectures with paged KV; null: contiguous sessions.
Result<std::vector<BatchedBenchRow>> batched_bench(const Model& m, const std::vector<int>& npl, int npp,
                                                   int ntg, int reps, const KvTypes& kv = {},
                                                   const SeqKnobs& knobs = {},
                                                   const EngineOptions* paged = nullptr,
                                                   BatchedSampling* sampling = nullptr);
std::string batched_bench_table(const std::vector<BatchedBenchRow>& rows);
nlohmann::json batched_bench_json(const std::vector<BatchedBenchRow>& rows);

}  // namespace strata::cli
