#include "bench_itl.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "base/clock.h"
#include "obs/bench_stats.h"
#include "runtime/engine.h"

namespace strata::cli {
namespace {

// Nearest-rank percentile (obs/bench_stats.h) of unsorted samples.
double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return nearest_rank(v, q);
}

std::vector<int32_t> random_prompt(int n, int n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
  return v;
}

// Requests in flight and what they saw: per request the times of its text events, and its TTFT.
struct Watch {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<double>> times;
  std::vector<double> ttft;
  std::vector<int> done;
  CompletionSink sink(size_t i) {
    return [this, i](const CompletionEvent& ev) {
      std::lock_guard<std::mutex> lk(mu);
      if (!ev.text.empty()) times[i].push_back(now_seconds());
      if (ev.done) {
        ttft[i] = ev.ttft_s;
        done[i] = 1;
        cv.notify_all();
      }
      return true;
    };
  }
  explicit Watch(size_t n) : times(n), ttft(n, 0), done(n, 0) {}
};

CompletionParams params(std::vector<int32_t> prompt, int n_predict, const SeqKnobs& knobs) {
  CompletionParams p;
  p.knobs = knobs;
  p.prompt = std::move(prompt);
  p.n_predict = n_predict;
  p.sampling.temp = 0;
  p.ignore_eos = true;
  return p;
}

}  // namespace

Result<ItlBenchResult> itl_bench(const Model& m, int n_prompt, int n_decoders, int n_ctx, const KvTypes& kv,
                                 const SeqKnobs& knobs) {
  if (n_prompt < 1 || n_decoders < 1 || n_decoders > 64)
    return err("--itl needs a prompt and 1..64 decoders");
  if (n_prompt + 2 > n_ctx) return err("--itl %d does not fit in -c %d", n_prompt, n_ctx);
  EngineOptions eo;
  eo.n_slots = n_decoders + 1;
  eo.max_queue = 4;
  // The same prompt runs idle, then beside the decoders: each time it must be prefilled, not
  // found in the prefix cache (which made the TTFTs a cache hit's since the cache landed).
  eo.prefix_cache = false;
  STRATA_ASSIGN(auto e, Engine::for_model(m, {.n_ctx = n_ctx, .kv = kv}, eo));
  const int V = m.n_vocab(), dec_prompt = 16;
  const auto longp = random_prompt(n_prompt, V, 7);
  auto wait_all = [](Watch& w, size_t n) {
    std::unique_lock<std::mutex> lk(w.mu);
    w.cv.wait(lk, [&] { return std::count(w.done.begin(), w.done.end(), 1) == static_cast<long>(n); });
  };
  ItlBenchResult r;
  r.n_prompt = n_prompt;
  r.n_decoders = n_decoders;
  {  // warm-up, then the prompt alone (best of 2)
    Watch w(3);
    for (size_t i = 0; i < 3; ++i) {
      STRATA_TRY(e->submit(params(longp, 1, knobs), w.sink(i)).status());
      std::unique_lock<std::mutex> lk(w.mu);
      w.cv.wait(lk, [&] { return w.done[i] == 1; });
    }
    r.ttft_idle_s = std::min(w.ttft[1], w.ttft[2]);
  }
  // The decoders with the prompt arriving once each has 8 tokens: their gaps from then until the
  // prompt's first token, by token index. Then the same decoders alone over the same token
  // indices (a decoder's step cost grows with its own depth: the same depths are compared).
  const size_t nd = static_cast<size_t>(n_decoders);
  const int k_arrive = 8;
  int k_end = 0;  // last token index any decoder reached while the prompt was prefilled
  std::vector<double> loaded;
  {
    Watch w(nd + 1);
    const int n_gen = std::max(64, n_ctx - dec_prompt - 1);
    for (size_t i = 0; i < nd; ++i)
      STRATA_TRY(e->submit(params(random_prompt(dec_prompt, V, 200 + static_cast<uint32_t>(i)), n_gen, knobs),
                           w.sink(i))
                     .status());
    bool stuck = false;
    for (const double t_give_up = now_seconds() + 120; !stuck;) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lk(w.mu);
      bool ready = true;
      for (size_t i = 0; i < nd; ++i) {
        ready = ready && w.times[i].size() >= static_cast<size_t>(k_arrive);
        stuck = stuck || w.done[i] != 0;
      }
      if (ready) break;
      stuck = stuck || now_seconds() > t_give_up;
    }
    if (stuck) {
      e.reset();  // its last events reach w before w goes
      return err("--itl: a decoder ended or gave no text before its %d-th token", k_arrive);
    }
    const double t_arrive = now_seconds();
    STRATA_TRY(e->submit(params(longp, 1, knobs), w.sink(nd)).status());
    {
      std::unique_lock<std::mutex> lk(w.mu);
      w.cv.wait(lk, [&] { return w.done[nd] == 1; });
    }
    const double t_done = now_seconds();
    r.ttft_loaded_s = w.ttft[nd];
    {
      std::lock_guard<std::mutex> lk(w.mu);
      for (size_t i = 0; i < nd; ++i) {
        const auto& t = w.times[i];
        for (size_t k = 1; k < t.size(); ++k)
          if (t[k] > t_arrive && t[k - 1] < t_done) {
            loaded.push_back(t[k] - t[k - 1]);
            k_end = std::max(k_end, static_cast<int>(k));
          }
      }
    }
    e.reset();  // ends the decoders (after the lock: their sinks take it)
  }
  STRATA_ASSIGN(e, Engine::for_model(m, {.n_ctx = n_ctx, .kv = kv}, eo));
  std::vector<double> alone;
  {
    Watch w(nd);
    for (size_t i = 0; i < nd; ++i)
      STRATA_TRY(
          e->submit(params(random_prompt(dec_prompt, V, 200 + static_cast<uint32_t>(i)), k_end + 1, knobs),
                    w.sink(i))
              .status());
    wait_all(w, nd);
    for (const auto& t : w.times)
      for (size_t k = k_arrive; k < t.size() && static_cast<int>(k) <= k_end; ++k)
        alone.push_back(t[k] - t[k - 1]);
  }
  r.itl_unloaded_p50 = pct(alone, 0.5);
  r.itl_unloaded_p99 = pct(alone, 0.99);
  r.loaded_gaps = static_cast<int>(loaded.size());
  r.itl_loaded_p50 = pct(loaded, 0.5);
  r.itl_loaded_p99 = pct(loaded, 0.99);
  return r;
}

std::string itl_bench_text(const ItlBenchResult& r) {
  char b[640];
  std::snprintf(
      b, sizeof b,
      "%d-token prompt arriving while %d sequences decode (engine defaults):\n"
      "  TTFT of the prompt:      idle %8.1f ms   beside the decoders %8.1f ms   (%.2fx)\n"
      "  decoders' token gaps:    unloaded p50 %6.2f ms p99 %6.2f ms\n"
      "                           during the prompt p50 %6.2f ms p99 %6.2f ms   (p99 %.2fx, %d gaps)\n",
      r.n_prompt, r.n_decoders, r.ttft_idle_s * 1e3, r.ttft_loaded_s * 1e3,
      r.ttft_idle_s > 0 ? r.ttft_loaded_s / r.ttft_idle_s : 0.0, r.itl_unloaded_p50 * 1e3,
      r.itl_unloaded_p99 * 1e3, r.itl_loaded_p50 * 1e3, r.itl_loaded_p99 * 1e3,
      r.itl_unloaded_p99 > 0 ? r.itl_loaded_p99 / r.itl_unloaded_p99 : 0.0, r.loaded_gaps);
  return b;
}

nlohmann::json itl_bench_json(const ItlBenchResult& r) {
  return {{"n_prompt", r.n_prompt},
          {"n_decoders", r.n_decoders},
          {"ttft_idle_s", r.ttft_idle_s},
          {"ttft_loaded_s", r.ttft_loaded_s},
          {"itl_unloaded_p50_s", r.itl_unloaded_p50},
          {"itl_unloaded_p99_s", r.itl_unloaded_p99},
          {"itl_loaded_p50_s", r.itl_loaded_p50},
          {"itl_loaded_p99_s", r.itl_loaded_p99},
          {"loaded_gaps", r.loaded_gaps}};
}

}  // namespace strata::cli
