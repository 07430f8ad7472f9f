#include "server/stats_json.h"

#include "memory/experts/expert_store.h"
#include "obs/proc_mem.h"

namespace strata::server {

using nlohmann::json;

namespace {

json percentiles(double (Engine::*pct)(double) const, const Engine& e) {
  return json{{"p50", (e.*pct)(0.5)}, {"p90", (e.*pct)(0.9)}, {"p99", (e.*pct)(0.99)}};
}

json experts_json(const ExpertStore& store) {
  const ExpertStoreInfo& info = store.info();
  const ExpertTotals t = store.totals();
  const int resident = info.resident ? info.n_layer * info.n_expert : store.resident_count();
  const uint64_t resident_bytes =
      info.resident ? info.routed_bytes : static_cast<uint64_t>(resident) * info.slot_bytes;
  return json{{"tier", info.resident ? "mmap" : info.tier},
              {"budget", info.resident ? info.routed_bytes : info.budget_bytes},
              {"resident", resident_bytes},
              {"resident_experts", resident},
              {"routed", info.routed_bytes},
              {"dense", info.dense_bytes},
              {"hit_rate", t.hit_rate()},
              {"hits", t.hits},
              {"late", t.late},
              {"misses", t.misses},
              {"read_bytes", t.bytes_read},
              {"stall_s", t.stall_s},
              {"prefetch_precision", t.prefetch_precision()},
              {"prefetch_recall", t.prefetch_recall()},
              {"evictions", t.evictions},
              {"n_layer", info.n_layer},
              {"n_expert", info.n_expert}};
}

json heat_json(const ExpertStore& store) {
  const ExpertStats s = store.stats();
  json counts = json::array(), resident = json::array();
  for (int l = 0; l < s.n_layer(); ++l) {
    json row = json::array();
    std::string res(static_cast<size_t>(s.n_expert()), '0');
    for (int e = 0; e < s.n_expert(); ++e) {
      row.push_back(s.activation(l, e));
      if (store.is_resident(l, e)) res[static_cast<size_t>(e)] = '1';
    }
    counts.push_back(std::move(row));
    resident.push_back(std::move(res));
  }
  return json{
      {"n_layer", s.n_layer()}, {"n_expert", s.n_expert()}, {"counts", counts}, {"resident", resident}};
}

}  // namespace

// The paged KV pool and its spill tiers (the numbers of /metrics' strata_kv_*).
nlohmann::json kv_json(const KvPoolStats& k) {
  const KvSpillStats& sp = k.spill;
  const uint64_t pool_blocks = static_cast<uint64_t>(k.blocks.used + k.blocks.cached);
  json parts = json::array();
  for (const KvPartBytes& p : k.parts)
    parts.push_back(json{{"name", p.name},
                         {"type", p.type},
                         {"bytes", p.bytes},
                         {"used_bytes", p.used_bytes},
                         {"bytes_per_token", p.bytes_per_token}});
  return json{
      {"block_size", k.block_size},
      {"block_bytes", k.block_bytes},
      {"blocks",
       {{"total", k.blocks.total},
        {"used", k.blocks.used},
        {"free", k.blocks.free},
        {"cached", k.blocks.cached},
        {"shared", k.blocks.shared},
        {"evicted", k.blocks.evicted}}},
      {"tiers",
       {{"pool", {{"blocks", pool_blocks}, {"bytes", pool_blocks * k.block_bytes}, {"hits", k.pool_hits}}},
        {"ram",
         {{"on", sp.ram_on},
          {"budget", sp.ram_budget},
          {"blocks", sp.ram_blocks},
          {"bytes", sp.ram_bytes},
          {"hits", sp.ram_hits},
          {"spilled_bytes", sp.spilled_ram_bytes},
          {"load_bandwidth", sp.ram_bw}}},
        {"ssd",
         {{"on", sp.disk_on},
          {"budget", sp.disk_budget},
          {"evicted_blocks", sp.disk_evicted},
          {"queue_blocks", sp.queue_blocks},
          {"queue_hits", sp.queue_hits},
          {"write_errors", sp.write_errors},
          {"blocks", sp.disk_blocks},
          {"bytes", sp.disk_bytes},
          {"hits", sp.disk_hits},
          {"spilled_bytes", sp.spilled_disk_bytes},
          {"load_bandwidth", sp.disk_bw},
          {"ignored_files", sp.disk_ignored},
          {"rejected_files", sp.disk_rejected}}}}},
      {"loaded_blocks", sp.ram_hits + sp.disk_hits},
      {"recomputed_blocks", sp.recomputed_blocks},
      {"dropped_blocks", sp.dropped_blocks},
      {"spill", {{"blocks", sp.spill_blocks}, {"seconds", sp.spill_s}}},
      {"decisions",
       {{"load", sp.load_decisions},
        {"recompute", sp.recompute_decisions},
        {"loads_beat_recompute", sp.loads_beat_recompute},
        {"predicted_load_s", sp.predicted_load_s},
        {"measured_load_s", sp.measured_load_s}}},
      {"prefill_s_per_token", sp.prefill_s_per_token},
      {"checkpoints",
       {{"count", k.checkpoints.count},
        {"capacity", k.checkpoints.capacity},
        {"bytes", k.checkpoints.bytes},
        {"saved", k.checkpoints.saved},
        {"restored", k.checkpoints.restored},
        {"dropped", k.checkpoints.dropped}}},
      {"parts", parts},
      {"unused_rows", k.unused_rows},
      {"fragmentation", k.fragmentation},
      {"fragmentation_avg", k.fragmentation_avg}};
}

json stats_json(const Engine& engine, const std::string& model_name, double uptime_s, bool with_heat) {
  const EngineCounters c = engine.counters();
  json slots = json::array();
  for (const SlotInfo& s : engine.slots())
    slots.push_back(json{{"id", s.id},
                         {"processing", s.processing},
                         {"n_prompt", s.processing ? s.n_prompt : 0},
                         {"n_predict", s.processing ? s.n_predict : 0}});
  json out{
      {"uptime_s", uptime_s},
      {"model", model_name},
      {"n_ctx", engine.n_ctx()},
      {"requests",
       {{"ok", c.requests_ok},
        {"cancelled", c.requests_cancelled},
        {"failed", c.requests_failed},
        {"rejected", c.requests_rejected},
        {"running", c.running},
        {"waiting", c.waiting}}},
      {"tokens", {{"prompt", c.prompt_tokens}, {"generated", c.gen_tokens}}},
      {"slots", slots},
      {"latency_s",
       {{"ttft", percentiles(&Engine::ttft_percentile, engine)},
        {"tpot", percentiles(&Engine::tpot_percentile, engine)}}},
      {"memory", {{"rss", rss_bytes()}, {"peak_rss", peak_rss_bytes()}, {"kv_cache", engine.kv_bytes()}}},
      {"experts", nullptr},
      {"kv", nullptr}};
  if (const KvPool* kv = engine.kv_pool()) {
    out["kv"] = kv_json(kv->stats());
    // Of the prompt tokens that reached a slot, those whose KV the prefix cache supplied.
    const uint64_t seen = c.prompt_tokens_cached + c.prompt_tokens_prefilled;
    out["kv"]["prompt_tokens_cached"] = c.prompt_tokens_cached;
    out["kv"]["prefix_hit_rate"] = seen ? static_cast<double>(c.prompt_tokens_cached) / seen : 0.0;
    out["kv"]["preemptions"] = c.preemptions;
    out["kv"]["recomputed_tokens"] = c.recomputed_tokens;
    out["kv"]["sequences"] = c.kv_sequences;  // holding blocks after the last turn
    out["kv"]["sequences_max"] = c.kv_sequences_max;
  }
  if (const ExpertStore* store = engine.expert_store()) {
    out["experts"] = experts_json(*store);
    if (with_heat) out["heat"] = heat_json(*store);
  }
  return out;
}

}  // namespace strata::server
