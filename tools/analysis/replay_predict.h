// Offline evaluation of expert predictors on a routing trace recorded with the router look-ahead
// (lines carry "lookahead", memory/routing_trace.h): which experts of layer L = l + d token t will
// use, predicted while layer l of token t computes, by
//   lookahead  the router of L applied to layer l's input (recorded by the store)
//   history    the experts token t-1 used at layer L
//   union      both;   agree: only experts both predict
// Scores per predictor and depth d, over decode tokens that have a look-ahead record:
//   precision / recall of the predicted set against the experts actually used;
//   with an LRU cache of `slots` experts driven by the trace (the state just before (t, L) is
//   requested): misses covered = used experts that were not resident and were predicted (a
//   prefetch would have hidden the read), wasted reads = predicted, not resident, not used.
// The store prefetches what is predicted and not resident, so covered misses per wasted read is
// the trade that matters, not the raw precision (predicting a resident expert costs nothing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "memory/experts/routing_trace.h"

namespace strata {

struct PredictScore {
  std::string predictor;  // lookahead | history | union | agree
  int depth = 1;
  uint64_t targets = 0;  // (token, layer) pairs scored
  uint64_t predicted = 0, used = 0, true_pos = 0;
  uint64_t misses = 0, misses_covered = 0, reads_wasted = 0;
  int64_t tokens = 0;

  double precision() const { return predicted ? double(true_pos) / double(predicted) : 0.0; }
  double recall() const { return used ? double(true_pos) / double(used) : 0.0; }
  double miss_coverage() const { return misses ? double(misses_covered) / double(misses) : 0.0; }
  double wasted_per_token() const { return tokens ? double(reads_wasted) / double(tokens) : 0.0; }
};

// Errors: the trace has no look-ahead records (record one with --routing-trace-out on a run with
// --expert-budget and --prefetch on), slots < top_k.
Result<std::vector<PredictScore>> replay_predictors(const RoutingTrace& t, int64_t slots);

}  // namespace strata
