#include "bench_spill.h"

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>

#include "base/units.h"

namespace strata::cli {
namespace {

std::vector<int32_t> random_tokens(int n, int n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
  return v;
}

// One request to its end: its last event.
Result<CompletionEvent> complete(Engine& e, std::vector<int32_t> prompt, const SeqKnobs& knobs) {
  CompletionParams p;
  p.knobs = knobs;
  p.prompt = std::move(prompt);
  p.n_predict = 1;
  p.sampling.temp = 0;
  p.ignore_eos = true;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  CompletionEvent last;
  STRATA_TRY(e.submit(p, [&](const CompletionEvent& ev) {
                if (ev.done) {
                  std::lock_guard<std::mutex> lk(mu);
                  last = ev;
                  done = true;
                  cv.notify_all();
                }
                return true;
              }).status());
  std::unique_lock<std::mutex> lk(mu);
  cv.wait(lk, [&] { return done; });
  if (last.finish == FinishReason::error) return err("--spill: a request failed: %s", last.error.c_str());
  return last;
}

}  // namespace

Result<SpillBenchResult> spill_bench(const Model& m, int n_prompt, EngineOptions eo, const KvTypes& kv,
                                     const SeqKnobs& knobs) {
  if (n_prompt < 16) return err("--spill %d: the prompt needs at least one block (16 tokens)", n_prompt);
  SpillBenchResult r;
  r.n_prompt = n_prompt;
  r.n_ctx = n_prompt + 64;
  eo.n_slots = 1;
  eo.manual_step = false;
  if (!eo.prefix_cache) return err("--spill measures the prefix cache: drop --no-prefix-cache");
  STRATA_ASSIGN(auto e, Engine::for_model(m, {.n_ctx = r.n_ctx, .kv = kv}, eo));
  if (!e->kv_pool() || !e->kv_pool()->prefix_cache())
    return err("--spill: %s keeps no paged KV with a prefix cache (sliding windows or another layout)",
               m.arch_name().c_str());
  const int V = m.n_vocab();
  const auto a = random_tokens(n_prompt + 4, V, 1), b = random_tokens(n_prompt + 4, V, 2);
  STRATA_ASSIGN(const CompletionEvent first, complete(*e, a, knobs));
  STRATA_ASSIGN(const CompletionEvent again, complete(*e, a, knobs));
  STRATA_TRY(complete(*e, b, knobs).status());  // evicts a's blocks: they spill
  STRATA_ASSIGN(const CompletionEvent back, complete(*e, a, knobs));
  r.ttft_recompute_s = first.ttft_s;
  r.ttft_pool_s = again.ttft_s;
  r.ttft_back_s = back.ttft_s;
  r.n_cached_back = back.n_cached;
  r.kv = e->kv_pool()->stats();
  return r;
}

std::string spill_bench_text(const SpillBenchResult& r) {
  const KvSpillStats& s = r.kv.spill;
  std::string o;
  char b[512];
  std::snprintf(
      b, sizeof b,
      "spill: prompt %d tokens (+4), blocks of %d positions (%s), pool %lld blocks, RAM tier %s, SSD tier "
      "%s\n",
      r.n_prompt, r.kv.block_size, format_bytes(r.kv.block_bytes).c_str(),
      static_cast<long long>(r.kv.blocks.total), s.ram_on ? format_bytes(s.ram_budget).c_str() : "off",
      !s.disk_on      ? "off"
      : s.disk_budget ? format_bytes(s.disk_budget).c_str()
                      : "on (no limit)");
  o += b;
  std::snprintf(b, sizeof b,
                "  TTFT recompute %.2f ms, pool hit %.2f ms, after eviction %.2f ms (%d tokens cached)\n",
                r.ttft_recompute_s * 1e3, r.ttft_pool_s * 1e3, r.ttft_back_s * 1e3, r.n_cached_back);
  o += b;
  std::snprintf(
      b, sizeof b,
      "  spilled %llu blocks: %.1f us per block on the scheduler thread; SSD queue waits %llu (%.2f ms), "
      "%lld blocks still queued, %llu loads from the queue\n",
      static_cast<unsigned long long>(s.spill_blocks),
      s.spill_blocks ? s.spill_s * 1e6 / static_cast<double>(s.spill_blocks) : 0.0,
      static_cast<unsigned long long>(s.queue_waits), s.queue_wait_s * 1e3,
      static_cast<long long>(s.queue_blocks), static_cast<unsigned long long>(s.queue_hits));
  o += b;
  std::snprintf(
      b, sizeof b,
      "  loaded %llu blocks from RAM, %llu from SSD; decisions: %llu load, %llu recompute (last: load "
      "%.3f ms predicted, recompute %.3f ms predicted, %.3f ms measured)\n",
      static_cast<unsigned long long>(s.ram_hits), static_cast<unsigned long long>(s.disk_hits),
      static_cast<unsigned long long>(s.load_decisions),
      static_cast<unsigned long long>(s.recompute_decisions), s.last_load_s * 1e3, s.last_recompute_s * 1e3,
      s.last_measured_s * 1e3);
  o += b;
  return o;
}

nlohmann::json spill_bench_json(const SpillBenchResult& r) {
  const KvSpillStats& s = r.kv.spill;
  return nlohmann::json{
      {"n_prompt", r.n_prompt},
      {"block_size", r.kv.block_size},
      {"block_bytes", r.kv.block_bytes},
      {"pool_blocks", r.kv.blocks.total},
      {"ttft_recompute_s", r.ttft_recompute_s},
      {"ttft_pool_s", r.ttft_pool_s},
      {"ttft_after_eviction_s", r.ttft_back_s},
      {"n_cached_after_eviction", r.n_cached_back},
      {"spill_blocks", s.spill_blocks},
      {"spill_seconds", s.spill_s},
      {"spill_us_per_block", s.spill_blocks ? s.spill_s * 1e6 / static_cast<double>(s.spill_blocks) : 0.0},
      {"ssd_queue_waits", s.queue_waits},
      {"ssd_queue_wait_s", s.queue_wait_s},
      {"ssd_queue_hits", s.queue_hits},
      {"ram_hits", s.ram_hits},
      {"ssd_hits", s.disk_hits},
      {"ssd_evicted_blocks", s.disk_evicted},
      {"load_decisions", s.load_decisions},
      {"recompute_decisions", s.recompute_decisions},
      {"last_load_predicted_s", s.last_load_s},
      {"last_recompute_predicted_s", s.last_recompute_s},
      {"last_load_measured_s", s.last_measured_s}};
}

}  // namespace strata::cli
