// The paged-KV pool flags of the commands that run the serving engine (serve, run, bench --itl),
// shared like tools/expert_flags.h:
//   --kv-budget SIZE            bytes of the KV pool (default -np x -c x KV bytes per position)
//   --block-size N              positions per KV block
//   --no-prefix-cache           no sharing of cached prompt prefixes
//   -ctxcp / --ctx-checkpoints N  window-ring snapshots per slot (sliding-window models' prefix cache)
//   -cram / --cache-ram SIZE    bytes of evicted prefix blocks kept in RAM (llama.cpp's name)
//   --prefix-cache-dir DIR      evicted / persisted prefix blocks on SSD
//   --prefix-cache-dir-size SIZE  bytes of those files at most (least recently used deleted)
//   --verbose                   a line per prefix load-or-recompute decision (predicted, measured)
// `strata plan` takes -cram, --prefix-cache-dir and --prefix-cache-dir-size too (plan_flags).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "base/status.h"
#include "runtime/engine.h"

namespace strata::cli {

struct KvPoolFlags {
  std::string kv_budget, cache_ram, prefix_cache_dir, prefix_cache_dir_size;
  int block_size = 16;
  int ctx_checkpoints = 8;  // as EngineOptions::ctx_checkpoints
  bool no_prefix_cache = false, verbose = false;

  void add(CLI::App& app);
  // Fills eo's KV pool fields; errors name the flag.
  Status apply(EngineOptions* eo) const;
  // Any pool flag given (an architecture without paged KV ignores them: the caller says so).
  bool any() const;
};

// `strata run`'s KV lines for stderr: the pool's blocks (those the sequence used: `positions`
// evaluated), KV bytes per token by part and type, the prefix cache's hit (`n_cached` of
// `n_prompt` prompt tokens) and tiers; or the contiguous KV of an architecture without paging.
std::string kv_summary_text(const Engine& e, const std::string& arch, int64_t positions, int n_cached,
                            int n_prompt);

// The pool flags `strata plan` prices (-cram, --prefix-cache-dir, --prefix-cache-dir-size,
// --kv-budget, --ctx-checkpoints).
struct KvSpillPlanFlags {
  std::string cache_ram, prefix_cache_dir, prefix_cache_dir_size;
  std::string kv_budget;    // --kv-budget: serve's pool of this many bytes
  int ctx_checkpoints = 8;  // --ctx-checkpoints: serve's window-ring checkpoints per sequence
  void add(CLI::App& app);
};

// --ctx-checkpoints N in [0, 4096] (serve / run and plan).
Status check_ctx_checkpoints(int n);

// SIZE of a flag (K/M/G suffixes); "" gives `absent`.
Result<uint64_t> parse_flag_size(const std::string& text, const char* flag, uint64_t absent);

}  // namespace strata::cli
