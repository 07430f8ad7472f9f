// Engram-store statistics, counted like the expert store's (memory/expert_stats.h): per forward
// step (= per token in decode) hits, misses, bytes read and stall time, and totals with the
// prefetch numbers. Exported as JSON (the "engram" part of --stats-out) and as a one-line summary.
//
// Counting rules (one "lookup" = one row id the forward asked rows() for):
//   hit    the row was in the RAM tier and ready (also: a repeat of a row asked earlier in the
//          same rows() call — it is fetched once)
//   late   a read for it was in flight (a prefetch that had not finished): compute waited
//   miss   it was not in the RAM tier: rows() had to start the read and wait for it
// bytes_read counts what the device transferred (the 4 KiB-aligned covers of the value and scale
// ranges, O_DIRECT), row_bytes the useful part.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct EngramStepStats {
  int64_t token0 = 0, n_tokens = 0;
  uint64_t lookups = 0, hits = 0, late = 0, misses = 0;
  uint64_t bytes_read = 0;
  double stall_s = 0.0;
};

struct EngramTotals {
  int64_t tokens = 0, steps = 0;
  uint64_t lookups = 0, hits = 0, late = 0, misses = 0;
  uint64_t reads = 0, bytes_read = 0, row_bytes = 0;  // completed row reads (demand + prefetch)
  uint64_t read_errors = 0, evictions = 0;
  double stall_s = 0.0, read_s = 0.0;
  uint64_t prefetch_requested = 0;  // row ids given to prefetch()
  uint64_t prefetch_issued = 0;     // reads it started (the rest were resident, in flight, or dropped)
  uint64_t prefetch_used = 0;       // prefetched rows rows() then asked for
  uint64_t prefetch_wasted = 0;     // prefetched rows evicted before any use
  uint64_t prefetch_dropped = 0;    // no evictable slot: the read was left to rows()

  double hit_rate() const { return lookups ? static_cast<double>(hits) / static_cast<double>(lookups) : 0.0; }
  double stall_ms_per_token() const { return tokens ? stall_s * 1e3 / static_cast<double>(tokens) : 0.0; }
};

struct EngramStoreInfo {
  std::string tier;  // "ram" (whole tables resident) or "ssd" (row cache over the file)
  std::vector<std::string> paths;
  int n_tables = 0;
  uint64_t table_bytes = 0;   // all tables, raw rows as stored
  uint64_t budget_bytes = 0;  // --engram-budget
  uint64_t slot_bytes = 0;    // one cached row (values + scales)
  int64_t n_slots = 0;
  uint64_t cache_bytes = 0;  // slots + their bookkeeping (<= budget)
  bool direct_io = false, prefetch = false;
  int io_threads = 0;
  std::string io_backend;  // "uring" | "threads" ("" for the ram tier after loading)
};

struct EngramStats {
  EngramTotals totals;
  std::vector<EngramStepStats> steps;
};

// {"info":{...},"totals":{...},"steps":[...]}
std::string engram_stats_json(const EngramStoreInfo& info, const EngramStats& s);
// One line for stderr at exit: tier, budget, hit rate, bytes, stall per token.
std::string engram_stats_summary(const EngramStoreInfo& info, const EngramStats& s);

}  // namespace strata
