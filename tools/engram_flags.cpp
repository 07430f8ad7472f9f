#include "engram_flags.h"

#include <cstdio>

#include "base/units.h"
#include "memory/engram/engram_store.h"
#include "memory/experts/expert_stats.h"
#include "model/arch.h"

namespace strata::cli {

void add_v41_numerics_flag(CLI::App& app, std::string* numerics) {
  app.add_option("--v41-numerics", *numerics,
                 "V4.1: fast (strata's kernels, native weights) or oracle (the reference's exact f32 orders)")
      ->check(CLI::IsMember({"fast", "oracle"}))
      ->capture_default_str();
}

Status apply_v41_numerics(const std::string& numerics, const std::string& model_path, LoadOptions* lo) {
  if (numerics == "oracle" && !is_checkpoint_dir(model_path))
    return err("--v41-numerics oracle needs a DeepSeek-V4.1 checkpoint directory (-m DIR), not %s",
               model_path.c_str());
  lo->v41_oracle = numerics == "oracle";
  return {};
}

void EngramFlags::add(CLI::App& app) {
  add_v41_numerics_flag(app, &numerics);
  app.add_option("--engram-budget", budget,
                 "V4.1: RAM for the Engram tables (K/M/G; absent: resident; below the tables: SSD tier)");
  app.add_option("--engram-prefetch", prefetch,
                 "V4.1: fetch a step's Engram rows as soon as its tokens are known")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--engram-io-threads", io_threads, "V4.1: Engram read threads")->capture_default_str();
  app.add_option("--engram-io-depth", io_depth, "V4.1: Engram reads in flight")->capture_default_str();
}

Status EngramFlags::apply(LoadOptions* lo, const std::string& model_path, const ExpertFlags& xf) const {
  const bool dir = is_checkpoint_dir(model_path);
  STRATA_TRY(apply_v41_numerics(numerics, model_path, lo));
  if (!budget.empty()) {
    if (!dir)
      return err("--engram-budget needs a DeepSeek-V4.1 checkpoint directory (-m DIR), not %s",
                 model_path.c_str());
    auto b = parse_size(budget);
    if (!b.ok()) return err("--engram-budget: %s", b.message().c_str());
    if (*b == 0) return err("--engram-budget must be > 0 (omit it to keep the Engram tables resident)");
    lo->engram.budget_bytes = *b;
  }
  if (io_threads < 1 || io_threads > 256) return err("--engram-io-threads %d must be in 1..256", io_threads);
  if (io_depth < 1 || io_depth > 4096) return err("--engram-io-depth %d must be in 1..4096", io_depth);
  lo->engram.prefetch = prefetch == "on";
  lo->engram.io_threads = io_threads;
  lo->engram.io_depth = io_depth;
  lo->engram.direct_io = !xf.buffered_io;
  if (dir) lo->expert_stats = !xf.heatmap.empty() || !xf.trace_out.empty() || !xf.profile.empty();
  return {};
}

Status EngramFlags::finish(const Model& m, const std::string& stats_out, bool quiet) const {
  const EngramStore* st = m.engram_store();
  if (!st) return {};
  const EngramStats s = st->stats();
  if (!stats_out.empty())
    STRATA_TRY(write_text_file(stats_out, "{\"engram\": " + engram_stats_json(st->info(), s) + "}\n"));
  if (!quiet) std::fprintf(stderr, "%s\n", engram_stats_summary(st->info(), s).c_str());
  return {};
}

}  // namespace strata::cli
