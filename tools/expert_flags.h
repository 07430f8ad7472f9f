// The tiered-expert-store flags shared by `run`, `logits` and `bench` (issue 6):
//   --expert-budget SIZE    fast-tier bytes for routed experts (absent: all resident, mmapped)
//   --expert-policy P       lru | lfu | static | adaptive (default adaptive)
//   --prefetch on|off       router look-ahead + parallel miss reads (off: naive synchronous reads)
//   --expert-profile FILE   activation counts: seeds the static hot set; saved back at exit
//   --io-backend B          auto | uring | threads | sync (default auto: io_uring when it can be set up;
//                           sync: blocking preads by the compute thread, the naive baseline)
//   --io-depth N            io_uring reads in flight (and prefetches queued); --io-threads N: threads backend
//   --expert-file BUNDLE    read experts from a `strata pack` bundle of the model (one read per expert)
//   --io-chunk SIZE         split each expert read into pieces of this size, read in parallel (0: no split)
//   --lookahead D, --predict lookahead|history|union, --lookahead-top M (prefetch the best M of top-k)
//   --stats-out FILE        statistics (.json, or .csv per-(layer, expert) counts)
//   --heatmap FILE.svg      per-(layer, expert) activation heatmap
//   --routing-trace-out F   one JSON line per (token, layer)
// add() registers them; apply() fills LoadOptions; finish() writes the outputs after the run and
// prints a one-line summary.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "base/status.h"
#include "model/model.h"

namespace strata::cli {

struct ExpertFlags {
  std::string budget, policy = "adaptive", prefetch = "on", profile, stats_out, heatmap, trace_out;
  std::string io_backend = "auto", expert_file, predict = "lookahead", io_chunk = "0";
  // lookahead 0 by default: measured on the synth model (800M budget, 2 cores), the look-ahead
  // read 1.9 GiB vs 1.0 GiB per 48 tokens (57.7% precision; replay --predictors: ~5 wasted reads per
  // covered miss at a 30% budget) and decoded slower (4.3-5.6 vs 6.6-7.2 tok/s). --lookahead 1 turns it on.
  int io_threads = 4, io_depth = 32, lookahead = 0, lookahead_top = 0;
  bool buffered_io = false;

  void add(CLI::App& app);
  Status apply(LoadOptions* lo) const;
  // Writes --stats-out / --heatmap / --expert-profile and prints the summary to stderr (when a
  // store exists).
  Status finish(const Model& m, bool quiet = false) const;
};

}  // namespace strata::cli
