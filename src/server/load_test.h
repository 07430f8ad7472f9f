// A load generator for an OpenAI-compatible server (strata serve, llama-server, vLLM): C clients
// send N streamed completion requests drawn from prompt classes (e.g. short and long), and the
// report gives, per class and overall, P50/P95/P99 of time to first token, time per output token
// and request latency, plus throughput — the numbers deployers ask load tests for.
//
//   LoadTestOptions o; o.host = "127.0.0.1"; o.port = 8080; o.concurrency = 4; o.requests = 32;
//   o.classes = {{"short", 32}, {"long", 512}};   // prompt lengths in words
//   auto rep = run_load_test(o);                  // then load_report_text(*rep) / load_report_json(*rep)
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace strata::server {

struct PromptClass {
  std::string name;
  int words = 32;  // prompt length in words (the server reports the token count)
};

struct LoadTestOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  int concurrency = 4;  // clients sending at once
  int requests = 32;    // in all; classes take turns
  int max_tokens = 64;
  bool ignore_eos = true;  // fixed output lengths make runs comparable
  float temperature = 0;
  std::vector<PromptClass> classes = {{"short", 32}, {"long", 256}};
  uint32_t seed = 1;  // prompt words
  double timeout_s = 600;
  bool keep_texts = false;  // LoadReport::texts: each request's generated text
};

struct LatencySummary {
  int n = 0;
  double p50 = 0, p95 = 0, p99 = 0, mean = 0, max = 0;
};

struct ClassReport {
  std::string name;
  int requests = 0, failed = 0;
  int64_t prompt_tokens = 0, gen_tokens = 0;
  LatencySummary ttft, tpot, latency;  // seconds
};

// A strata server's own numbers over the run (GET /v1/strata/stats, polled every 200 ms; absent
// for other servers; JSON "server_stats"): the most requests running at once and KV blocks referenced, the
// mean of the polled fragmentation while any block was referenced (the run's time average), and at the end
// the pool's life-long time-averaged fragmentation, preemptions and prefix hit rate.
struct ServerKvReport {
  bool seen = false;  // the server answered /v1/strata/stats
  bool paged = false;
  int max_running = 0;
  int max_kv_sequences = 0;  // the most sequences holding KV blocks at once (the server's count)
  int64_t max_blocks_used = 0, blocks_total = 0;
  double fragmentation_run = 0, fragmentation_avg = 0, prefix_hit_rate = 0;
  uint64_t preemptions = 0, recomputed_tokens = 0;
  // The spill tiers' load-or-recompute decisions (kv/kv_spill.h's cost model) at the end: runs of
  // prefix blocks found in RAM / SSD loaded or recomputed; of the loads, those whose measured time
  // was at most the recompute time predicted for the same run; blocks spilled, loaded back, recomputed.
  uint64_t load_decisions = 0, recompute_decisions = 0, loads_beat_recompute = 0;
  uint64_t spilled_blocks = 0, loaded_blocks = 0, recomputed_blocks = 0;
  double predicted_load_s = 0, measured_load_s = 0;
  int polls = 0;
};

struct LoadReport {
  double wall_s = 0;
  int concurrency = 0;
  std::vector<ClassReport> classes;  // per class, then "all" last
  std::vector<std::string> errors;   // the first few failure messages
  ServerKvReport server;
  // With keep_texts: request i's generated text (empty when it failed), in request order.
  std::vector<std::string> texts;
  double gen_tok_s() const;  // generated tokens / wall time (all classes)
  double req_s() const;
};

// Nearest-rank percentiles (in place: sorts `v`).
LatencySummary summarize_latency(std::vector<double> v);
// A deterministic prompt of `words` words.
std::string load_prompt(int words, uint32_t seed);

Result<LoadReport> run_load_test(const LoadTestOptions& o);
std::string load_report_text(const LoadReport& r);
nlohmann::json load_report_json(const LoadReport& r);

}  // namespace strata::server
