#include "server/load_test.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "base/clock.h"
#include "obs/bench_stats.h"

namespace strata::server {

using nlohmann::json;

LatencySummary summarize_latency(std::vector<double> v) {
  LatencySummary s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.p50 = nearest_rank(v, 0.50);
  s.p95 = nearest_rank(v, 0.95);
  s.p99 = nearest_rank(v, 0.99);
  s.max = v.back();
  s.mean = summarize(v).mean;
  return s;
}

std::string load_prompt(int words, uint32_t seed) {
  static const char* kWords[] = {
      "the",   "river", "of",     "time",    "and",    "a",     "small",  "house", "stood",  "near",
      "old",   "road",  "where",  "people",  "walked", "every", "day",    "to",    "market", "with",
      "bread", "stone", "light",  "morning", "quiet",  "field", "under",  "sky",   "long",   "story",
      "told",  "by",    "friend", "who",     "knew",   "many",  "things", "about", "world",  "in",
      "which", "we",    "live",   "after",   "rain",   "came",  "garden", "grew"};
  constexpr uint32_t n = sizeof(kWords) / sizeof(kWords[0]);
  uint32_t x = seed * 2654435761u + 12345u;
  std::string s;
  for (int i = 0; i < words; ++i) {
    x = x * 1664525u + 1013904223u;
    if (i) s += ' ';
    s += kWords[(x >> 8) % n];
  }
  return s;
}

namespace {

struct Sample {
  int cls = 0;
  bool ok = false;
  std::string error;
  double ttft = 0, latency = 0, tpot = -1;
  int64_t prompt_tokens = 0, gen_tokens = 0;
  std::string text;  // with keep_texts
};

// One streamed request: times the first text chunk and the end, reads usage from the last chunk.
Sample one_request(httplib::Client& cli, const LoadTestOptions& o, int cls, const std::string& prompt) {
  Sample s;
  s.cls = cls;
  json body{{"prompt", prompt},
            {"max_tokens", o.max_tokens},
            {"temperature", o.temperature},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}},
            {"ignore_eos", o.ignore_eos}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!o.api_key.empty()) req.set_header("Authorization", "Bearer " + o.api_key);
  std::string buf, raw;
  bool done = false;
  int text_chunks = 0;
  double t_first = 0;
  const double t0 = now_seconds();
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    raw.append(data, len);
    buf.append(data, len);
    size_t end;
    while ((end = buf.find("\n\n")) != std::string::npos) {
      const std::string ev = buf.substr(0, end);
      buf.erase(0, end + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      const std::string payload = ev.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      json j = json::parse(payload, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) s.error = j["error"].value("message", "error");
      if (j.contains("usage") && j["usage"].is_object()) {
        s.prompt_tokens = j["usage"].value("prompt_tokens", 0);
        s.gen_tokens = j["usage"].value("completion_tokens", 0);
      }
      if (j.contains("choices") && !j["choices"].empty()) {
        const json& c = j["choices"][0];
        const std::string text =
            c.contains("text") && c["text"].is_string() ? c["text"].get<std::string>() : "";
        if (!text.empty() && ++text_chunks == 1) t_first = now_seconds();
        if (o.keep_texts) s.text += text;
      }
    }
    return true;
  };
  auto res = cli.send(req);
  const double t_end = now_seconds();
  if (!res) {
    s.error = "HTTP request failed: " + httplib::to_string(res.error());
    return s;
  }
  if (res->status != 200) {
    json j = json::parse(raw.empty() ? res->body : raw, nullptr, false);
    s.error = "HTTP " + std::to_string(res->status) + ": " +
              (!j.is_discarded() && j.contains("error") ? j["error"].value("message", "") : raw);
    return s;
  }
  if (!s.error.empty()) return s;
  if (!done) {
    s.error = "stream ended without [DONE]";
    return s;
  }
  s.ok = true;
  s.latency = t_end - t0;
  s.ttft = (t_first > 0 ? t_first : t_end) - t0;
  if (s.gen_tokens > 1 && t_first > 0) s.tpot = (t_end - t_first) / static_cast<double>(s.gen_tokens - 1);
  return s;
}

ClassReport report_of(const std::string& name, const std::vector<Sample>& all, int cls) {
  ClassReport r;
  r.name = name;
  std::vector<double> ttft, tpot, lat;
  for (const Sample& s : all) {
    if (cls >= 0 && s.cls != cls) continue;
    ++r.requests;
    if (!s.ok) {
      ++r.failed;
      continue;
    }
    r.prompt_tokens += s.prompt_tokens;
    r.gen_tokens += s.gen_tokens;
    ttft.push_back(s.ttft);
    lat.push_back(s.latency);
    if (s.tpot >= 0) tpot.push_back(s.tpot);
  }
  r.ttft = summarize_latency(std::move(ttft));
  r.tpot = summarize_latency(std::move(tpot));
  r.latency = summarize_latency(std::move(lat));
  return r;
}

// Polls a strata server's /v1/strata/stats until `done`; another server (no such route) ends it.
class StatsPoller {
 public:
  explicit StatsPoller(const LoadTestOptions& o) : o_(o), th_([this] { loop(); }) {}
  ~StatsPoller() { stop(); }
  ServerKvReport stop() {
    if (th_.joinable()) {
      done_ = true;
      th_.join();
      poll(true);  // the end state (preemptions, the pool's averages)
    }
    if (r_.seen && frag_n_ > 0) r_.fragmentation_run = frag_sum_ / frag_n_;
    return r_;
  }

 private:
  void loop() {
    while (!done_ && poll(false)) {
      for (int i = 0; i < 20 && !done_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  bool poll(bool final) {
    httplib::Client cli(o_.host, o_.port);
    cli.set_connection_timeout(2, 0);
    cli.set_read_timeout(5, 0);
    httplib::Headers h;
    if (!o_.api_key.empty()) h.emplace("Authorization", "Bearer " + o_.api_key);
    auto res = cli.Get("/v1/strata/stats", h);
    if (!res || res->status != 200) return false;
    const json j = json::parse(res->body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("requests")) return false;
    r_.seen = true;
    ++r_.polls;
    r_.max_running = std::max(r_.max_running, j["requests"].value("running", 0));
    const json& kv = j["kv"];
    if (!kv.is_object()) return true;
    r_.paged = true;
    const int64_t used = kv["blocks"].value("used", int64_t{0});
    r_.max_blocks_used = std::max(r_.max_blocks_used, used);
    r_.blocks_total = kv["blocks"].value("total", int64_t{0});
    if (used > 0 && !final) {
      frag_sum_ += kv.value("fragmentation", 0.0);
      ++frag_n_;
    }
    r_.fragmentation_avg = kv.value("fragmentation_avg", 0.0);
    r_.prefix_hit_rate = kv.value("prefix_hit_rate", 0.0);
    r_.preemptions = kv.value("preemptions", uint64_t{0});
    r_.recomputed_tokens = kv.value("recomputed_tokens", uint64_t{0});
    r_.max_kv_sequences = std::max(r_.max_kv_sequences, kv.value("sequences_max", 0));
    r_.loaded_blocks = kv.value("loaded_blocks", uint64_t{0});
    r_.recomputed_blocks = kv.value("recomputed_blocks", uint64_t{0});
    if (kv.contains("spill") && kv["spill"].is_object())
      r_.spilled_blocks = kv["spill"].value("blocks", uint64_t{0});
    if (kv.contains("decisions") && kv["decisions"].is_object()) {
      const json& d = kv["decisions"];
      r_.load_decisions = d.value("load", uint64_t{0});
      r_.recompute_decisions = d.value("recompute", uint64_t{0});
      r_.loads_beat_recompute = d.value("loads_beat_recompute", uint64_t{0});
      r_.predicted_load_s = d.value("predicted_load_s", 0.0);
      r_.measured_load_s = d.value("measured_load_s", 0.0);
    }
    return true;
  }

  const LoadTestOptions& o_;
  std::atomic<bool> done_{false};
  ServerKvReport r_;
  double frag_sum_ = 0;
  int frag_n_ = 0;
  std::thread th_;  // last: started once the rest is set
};

}  // namespace

double LoadReport::gen_tok_s() const {
  return classes.empty() || wall_s <= 0 ? 0 : static_cast<double>(classes.back().gen_tokens) / wall_s;
}

double LoadReport::req_s() const {
  return classes.empty() || wall_s <= 0 ? 0 : (classes.back().requests - classes.back().failed) / wall_s;
}

Result<LoadReport> run_load_test(const LoadTestOptions& o) {
  if (o.concurrency < 1 || o.concurrency > 1024)
    return err("--concurrency %d must be in [1, 1024]", o.concurrency);
  if (o.requests < 1) return err("--requests %d must be >= 1", o.requests);
  if (o.max_tokens < 1) return err("--max-tokens %d must be >= 1", o.max_tokens);
  if (o.classes.empty()) return err("no prompt classes");
  for (const auto& c : o.classes)
    if (c.words < 1) return err("prompt class '%s': %d words (must be >= 1)", c.name.c_str(), c.words);
  {
    httplib::Client probe(o.host, o.port);
    probe.set_connection_timeout(5, 0);
    auto h = probe.Get("/v1/models");
    if (!h)
      return err("cannot reach http://%s:%d (%s)", o.host.c_str(), o.port,
                 httplib::to_string(h.error()).c_str());
  }
  std::vector<Sample> samples(static_cast<size_t>(o.requests));
  std::atomic<int> next{0};
  StatsPoller poller(o);
  const double t0 = now_seconds();
  std::vector<std::thread> clients;
  const int n_cls = static_cast<int>(o.classes.size());
  for (int c = 0; c < std::min(o.concurrency, o.requests); ++c) {
    clients.emplace_back([&] {
      httplib::Client cli(o.host, o.port);
      cli.set_tcp_nodelay(true);
      const time_t secs = static_cast<time_t>(o.timeout_s);
      cli.set_read_timeout(secs, 0);
      cli.set_write_timeout(secs, 0);
      for (int i; (i = next.fetch_add(1)) < o.requests;) {
        const int cls = i % n_cls;
        const std::string prompt =
            load_prompt(o.classes[static_cast<size_t>(cls)].words, o.seed + static_cast<uint32_t>(i));
        samples[static_cast<size_t>(i)] = one_request(cli, o, cls, prompt);
      }
    });
  }
  for (auto& t : clients) t.join();
  LoadReport rep;
  rep.wall_s = now_seconds() - t0;
  rep.server = poller.stop();
  rep.concurrency = o.concurrency;
  for (int c = 0; c < n_cls; ++c)
    rep.classes.push_back(report_of(o.classes[static_cast<size_t>(c)].name, samples, c));
  rep.classes.push_back(report_of("all", samples, -1));
  for (const Sample& s : samples)
    if (!s.ok && rep.errors.size() < 5) rep.errors.push_back(s.error);
  if (o.keep_texts)
    for (Sample& s : samples) rep.texts.push_back(s.ok ? std::move(s.text) : std::string());
  return rep;
}

std::string load_report_text(const LoadReport& r) {
  std::string o;
  char line[512];
  std::snprintf(line, sizeof line, "%-8s %5s %5s %8s %8s | %8s %8s %8s | %8s %8s %8s | %8s %8s\n", "class",
                "reqs", "fail", "prompt", "gen", "ttft50", "ttft95", "ttft99", "tpot50", "tpot95", "tpot99",
                "lat50", "lat99");
  o += line;
  for (const ClassReport& c : r.classes) {
    const double np =
        c.requests - c.failed > 0 ? static_cast<double>(c.prompt_tokens) / (c.requests - c.failed) : 0;
    const double ng =
        c.requests - c.failed > 0 ? static_cast<double>(c.gen_tokens) / (c.requests - c.failed) : 0;
    std::snprintf(
        line, sizeof line, "%-8s %5d %5d %8.1f %8.1f | %8.1f %8.1f %8.1f | %8.2f %8.2f %8.2f | %8.1f %8.1f\n",
        c.name.c_str(), c.requests, c.failed, np, ng, c.ttft.p50 * 1e3, c.ttft.p95 * 1e3, c.ttft.p99 * 1e3,
        c.tpot.p50 * 1e3, c.tpot.p95 * 1e3, c.tpot.p99 * 1e3, c.latency.p50 * 1e3, c.latency.p99 * 1e3);
    o += line;
  }
  std::snprintf(
      line, sizeof line,
      "(ms; prompt/gen: mean tokens per request) %d clients, %.2f s wall, %.2f requests/s, %.1f generated "
      "tokens/s\n",
      r.concurrency, r.wall_s, r.req_s(), r.gen_tok_s());
  o += line;
  const ServerKvReport& k = r.server;
  if (k.paged) {
    std::snprintf(line, sizeof line,
                  "server KV: at most %d requests running, %d holding KV, %lld of %lld blocks used; "
                  "fragmentation %.2f%% "
                  "(run mean of %d polls; pool's life %.2f%%), %llu preemptions (%llu tokens recomputed), "
                  "prefix hit rate %.3f\n",
                  k.max_running, k.max_kv_sequences, static_cast<long long>(k.max_blocks_used),
                  static_cast<long long>(k.blocks_total), 100.0 * k.fragmentation_run, k.polls,
                  100.0 * k.fragmentation_avg, static_cast<unsigned long long>(k.preemptions),
                  static_cast<unsigned long long>(k.recomputed_tokens), k.prefix_hit_rate);
    o += line;
    if (k.spilled_blocks + k.load_decisions + k.recompute_decisions > 0) {
      std::snprintf(
          line, sizeof line,
          "server KV tiers: %llu blocks spilled, %llu loaded back, %llu recomputed; decisions: %llu "
          "load (%llu measured faster than the recompute predicted), %llu recompute; load %.2f ms "
          "predicted, %.2f ms measured in all\n",
          static_cast<unsigned long long>(k.spilled_blocks), static_cast<unsigned long long>(k.loaded_blocks),
          static_cast<unsigned long long>(k.recomputed_blocks),
          static_cast<unsigned long long>(k.load_decisions),
          static_cast<unsigned long long>(k.loads_beat_recompute),
          static_cast<unsigned long long>(k.recompute_decisions), k.predicted_load_s * 1e3,
          k.measured_load_s * 1e3);
      o += line;
    }
  } else if (k.seen) {
    std::snprintf(line, sizeof line, "server: at most %d requests running (no paged KV)\n", k.max_running);
    o += line;
  }
  for (const auto& e : r.errors) o += "error: " + e + "\n";
  return o;
}

json load_report_json(const LoadReport& r) {
  auto lat = [](const LatencySummary& s) {
    return json{{"n", s.n}, {"p50", s.p50}, {"p95", s.p95}, {"p99", s.p99}, {"mean", s.mean}, {"max", s.max}};
  };
  json classes = json::array();
  for (const ClassReport& c : r.classes)
    classes.push_back(json{{"class", c.name},
                           {"requests", c.requests},
                           {"failed", c.failed},
                           {"prompt_tokens", c.prompt_tokens},
                           {"gen_tokens", c.gen_tokens},
                           {"ttft_s", lat(c.ttft)},
                           {"tpot_s", lat(c.tpot)},
                           {"latency_s", lat(c.latency)}});
  json j{{"concurrency", r.concurrency}, {"wall_s", r.wall_s}, {"requests_per_s", r.req_s()},
         {"gen_tok_s", r.gen_tok_s()},   {"classes", classes}, {"errors", r.errors},
         {"server_stats", nullptr}};
  const ServerKvReport& k = r.server;
  if (k.seen)
    j["server_stats"] = json{{"max_running", k.max_running},
                             {"paged_kv", k.paged},
                             {"max_kv_sequences", k.max_kv_sequences},
                             {"max_blocks_used", k.max_blocks_used},
                             {"blocks_total", k.blocks_total},
                             {"fragmentation_run", k.fragmentation_run},
                             {"fragmentation_avg", k.fragmentation_avg},
                             {"preemptions", k.preemptions},
                             {"recomputed_tokens", k.recomputed_tokens},
                             {"prefix_hit_rate", k.prefix_hit_rate},
                             {"spilled_blocks", k.spilled_blocks},
                             {"loaded_blocks", k.loaded_blocks},
                             {"recomputed_blocks", k.recomputed_blocks},
                             {"decisions",
                              {{"load", k.load_decisions},
                               {"recompute", k.recompute_decisions},
                               {"loads_beat_recompute", k.loads_beat_recompute},
                               {"predicted_load_s", k.predicted_load_s},
                               {"measured_load_s", k.measured_load_s}}},
                             {"polls", k.polls}};
  return j;
}

}  // namespace strata::server
