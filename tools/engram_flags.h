// The Engram-store flags of `run` and `logits` for DeepSeek-V4.1 checkpoint directories (issue 7),
// shared like tools/expert_flags.h:
//   --engram-budget SIZE       RAM for the Engram tables (absent: resident with the weights); a
//                              budget below the tables puts them on the SSD tier (O_DIRECT reads
//                              of the checkpoint) behind a row cache of that size
//   --engram-prefetch on|off   start a step's row reads as soon as its token ids are known
//   --engram-io-threads N, --engram-io-depth N
//   --v41-numerics fast|oracle (below)
// The statistics go to --stats-out (the expert flags' file; a checkpoint directory has no expert
// store) and a one-line summary to stderr at exit.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "base/status.h"
#include "expert_flags.h"
#include "model/model.h"

namespace strata::cli {

// --v41-numerics fast|oracle: how a V4.1 checkpoint directory computes (model/deepseek_v41/
// v41_forward.h V41Numerics): fast (the default, strata's kernels on native weights) or oracle
// (the official reference's summation orders bit for bit, f32 weights, scalar; for checking).
void add_v41_numerics_flag(CLI::App& app, std::string* numerics);
Status apply_v41_numerics(const std::string& numerics, const std::string& model_path, LoadOptions* lo);

struct EngramFlags {
  std::string budget, prefetch = "on", numerics = "fast";
  int io_threads = 4, io_depth = 64;

  void add(CLI::App& app);
  // Fills lo->engram. For a checkpoint directory, --stats-out is the Engram statistics file (the
  // expert store, which a directory does not have, then is not asked for it).
  Status apply(LoadOptions* lo, const std::string& model_path, const ExpertFlags& xf) const;
  // Writes the statistics to stats_out (when given) and prints the summary (unless quiet).
  Status finish(const Model& m, const std::string& stats_out, bool quiet = false) const;
};

}  // namespace strata::cli
