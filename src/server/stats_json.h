// The live numbers of a running server as one JSON object: what the dashboard (GET /, fed by the
// SSE stream /v1/strata/events) and GET /v1/strata/stats show. The same sources as /metrics:
//   {"uptime_s", "model",
//    "requests": {"ok", "cancelled", "failed", "rejected", "running", "waiting"},
//    "tokens": {"prompt", "generated"}, "slots": [{"id", "processing", "n_prompt", "n_predict"}],
//    "latency_s": {"ttft": {"p50", "p90", "p99"}, "tpot": {...}}   (the last 4096 samples),
//    "memory": {"rss", "peak_rss", "kv_cache"}                    (bytes),
//    "experts": null | {"tier", "budget", "resident", "resident_experts", "routed", "dense",
//                       "hit_rate", "hits", "late", "misses", "read_bytes", "stall_s",
//                       "prefetch_precision", "prefetch_recall", "evictions",
//                       "n_layer", "n_expert"},
//    "kv": null | {"block_size", "block_bytes", "blocks": {...}, "tiers": {"pool", "ram", "ssd"},
//           "loaded_blocks", "recomputed_blocks", "parts": [...], "fragmentation", "fragmentation_avg"
//           (time-weighted), "prompt_tokens_cached", "prefix_hit_rate" (cached of cached + prefilled prompt
//           tokens), ...},
//    "heat": (with_heat and a store) {"n_layer", "n_expert", "counts": [[per expert] per layer],
//            "resident": ["0/1 per expert" per layer]}}
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/engine.h"

namespace strata::server {

nlohmann::json stats_json(const Engine& engine, const std::string& model_name, double uptime_s,
                          bool with_heat);
// The paged KV pool and its spill tiers: stats_json's "kv" object (without the engine's prompt
// counters), also `strata bench --json`'s.
nlohmann::json kv_json(const KvPoolStats& k);

}  // namespace strata::server
