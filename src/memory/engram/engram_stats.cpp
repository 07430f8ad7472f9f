#include "memory/engram/engram_stats.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "base/units.h"

namespace strata {

std::string engram_stats_json(const EngramStoreInfo& info, const EngramStats& s) {
  using nlohmann::json;
  json j;
  json& i = j["info"];
  i["tier"] = info.tier;
  i["paths"] = info.paths;
  i["n_tables"] = info.n_tables;
  i["table_bytes"] = info.table_bytes;
  i["budget_bytes"] = info.budget_bytes;
  i["slot_bytes"] = info.slot_bytes;
  i["n_slots"] = info.n_slots;
  i["cache_bytes"] = info.cache_bytes;
  i["direct_io"] = info.direct_io;
  i["prefetch"] = info.prefetch;
  i["io_threads"] = info.io_threads;
  i["io_backend"] = info.io_backend;
  const EngramTotals& t = s.totals;
  json& o = j["totals"];
  o["tokens"] = t.tokens;
  o["steps"] = t.steps;
  o["lookups"] = t.lookups;
  o["hits"] = t.hits;
  o["late"] = t.late;
  o["misses"] = t.misses;
  o["hit_rate"] = t.hit_rate();
  o["reads"] = t.reads;
  o["bytes_read"] = t.bytes_read;
  o["row_bytes"] = t.row_bytes;
  o["read_errors"] = t.read_errors;
  o["evictions"] = t.evictions;
  o["stall_s"] = t.stall_s;
  o["stall_ms_per_token"] = t.stall_ms_per_token();
  o["read_s"] = t.read_s;
  o["prefetch_requested"] = t.prefetch_requested;
  o["prefetch_issued"] = t.prefetch_issued;
  o["prefetch_used"] = t.prefetch_used;
  o["prefetch_wasted"] = t.prefetch_wasted;
  o["prefetch_dropped"] = t.prefetch_dropped;
  json steps = json::array();
  for (const EngramStepStats& st : s.steps)
    steps.push_back({{"token0", st.token0},
                     {"n_tokens", st.n_tokens},
                     {"lookups", st.lookups},
                     {"hits", st.hits},
                     {"late", st.late},
                     {"misses", st.misses},
                     {"bytes_read", st.bytes_read},
                     {"stall_s", st.stall_s}});
  j["steps"] = std::move(steps);
  return j.dump(1);
}

std::string engram_stats_summary(const EngramStoreInfo& info, const EngramStats& s) {
  const EngramTotals& t = s.totals;
  char buf[768];
  if (info.tier == "ram") {
    std::snprintf(
        buf, sizeof buf,
        "strata: engram    %d tables resident in RAM (%s of budget %s, loaded %s), %llu lookups, %lld tokens",
        info.n_tables, format_bytes(info.table_bytes).c_str(), format_bytes(info.budget_bytes).c_str(),
        format_bytes(t.bytes_read).c_str(), static_cast<unsigned long long>(t.lookups),
        static_cast<long long>(t.tokens));
    return buf;
  }
  std::snprintf(
      buf, sizeof buf,
      "strata: engram    ssd tier (%s, %s), row cache %lld rows x %s = %s of %s tables, prefetch %s; "
      "hit rate %.1f%% (%llu hits, %llu late, %llu misses), read %s in %llu reads, stall %.3f ms/token",
      info.direct_io ? "O_DIRECT" : "buffered", info.io_backend.c_str(), static_cast<long long>(info.n_slots),
      format_bytes(info.slot_bytes).c_str(), format_bytes(info.cache_bytes).c_str(),
      format_bytes(info.table_bytes).c_str(), info.prefetch ? "on" : "off", 100.0 * t.hit_rate(),
      static_cast<unsigned long long>(t.hits), static_cast<unsigned long long>(t.late),
      static_cast<unsigned long long>(t.misses), format_bytes(t.bytes_read).c_str(),
      static_cast<unsigned long long>(t.reads), t.stall_ms_per_token());
  return buf;
}

}  // namespace strata
