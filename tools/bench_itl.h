// strata bench --itl P: what a long prompt costs the sequences already decoding. Through the serving
// engine (runtime/engine.h, default settings): the P-token prompt's TTFT alone (idle), the
// inter-token latency of D decoding sequences while the prompt arrives and is prefilled, against the
// same sequences alone over the same token indices (a decoder's step cost grows with its depth),
// and the prompt's TTFT beside them.
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "model/model.h"

namespace strata::cli {

struct ItlBenchResult {
  int n_prompt = 0, n_decoders = 0;
  double ttft_idle_s = 0, ttft_loaded_s = 0;
  double itl_unloaded_p50 = 0, itl_unloaded_p99 = 0;  // seconds between a decoder's tokens
  double itl_loaded_p50 = 0, itl_loaded_p99 = 0;      // ... while the prompt was being prefilled
  int loaded_gaps = 0;                                // gaps measured while it was
};

Result<ItlBenchResult> itl_bench(const Model& m, int n_prompt, int n_decoders, int n_ctx,
                                 const KvTypes& kv = {}, const SeqKnobs& knobs = {});
std::string itl_bench_text(const ItlBenchResult& r);
nlohmann::json itl_bench_json(const ItlBenchResult& r);

}  // namespace strata::cli
