#include "bench_batched.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <time.h>

#include "base/clock.h"
#include "obs/bench_stats.h"
#include "server/stats_json.h"

namespace strata::cli {
namespace {

// Blocks for every sequence's next n positions (paged sessions; as the engine reserves before a step).
Status reserve(KvPool* pool, std::vector<Session*>& sess, int64_t n) {
  if (!pool) return {};
  for (Session* s : sess) STRATA_TRY(pool->reserve(*s->kv_blocks(), s->n_past() + n));
  return {};
}

// A sequence's sampler (a request's), under the grammar when there is one.
std::unique_ptr<Sampler> new_sampler(const Model& m, BatchedSampling& sp, int seq) {
  SamplerParams p = sp.params;
  p.seed = p.seed + static_cast<uint32_t>(seq);
  auto s = std::make_unique<Sampler>(p, m.n_vocab());
  if (sp.grammar) s->set_constraint(std::make_unique<GrammarConstraint>(sp.grammar, sp.vocab));
  return s;
}

struct RunTimes {
  double t_pp = 0, t_tg = 0, t_sample = 0, cpu_sample = 0;
};

// This thread's CPU time: sampling measured so is not inflated by other processes on a busy machine.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One PP + TG run of npl sequences.
Result<RunTimes> run_once(const Model& m, std::vector<std::unique_ptr<Session>>& sess, KvPool* pool, int npp,
                          int ntg, std::mt19937& rng, BatchedSampling* sp) {
  const int npl = static_cast<int>(sess.size()), V = m.n_vocab();
  std::uniform_int_distribution<int32_t> tok(0, V - 1);
  std::vector<Session*> ptrs;
  for (auto& s : sess) {
    s->reset();
    ptrs.push_back(s.get());
  }
  std::vector<int32_t> tokens, seq;
  std::vector<float> logits(static_cast<size_t>(npl) * V);
  for (int i = 0; i < npl; ++i)
    for (int t = 0; t < npp; ++t) {
      tokens.push_back(tok(rng));
      seq.push_back(i);
    }
  double t0 = now_seconds();
  if (npp > 0) {
    STRATA_TRY(reserve(pool, ptrs, npp));
    STRATA_TRY(m.forward(ptrs, TokenBatch{tokens, seq}, logits.data()));
  }
  const double t_pp = now_seconds() - t0;
  tokens.assign(static_cast<size_t>(npl), 0);
  seq.resize(static_cast<size_t>(npl));
  for (int i = 0; i < npl; ++i) seq[static_cast<size_t>(i)] = i;
  std::vector<std::unique_ptr<Sampler>> samplers;
  for (int i = 0; sp && i < npl; ++i) samplers.push_back(new_sampler(m, *sp, i));
  t0 = now_seconds();
  double t_sample = 0, cpu_sample = 0;
  for (int step = 0; step < ntg; ++step) {
    const double ts = now_seconds(), cs = thread_cpu_seconds();
    for (int i = 0; i < npl; ++i) {
      int32_t& t = tokens[static_cast<size_t>(i)];
      if (!sp || (step == 0 && npp == 0)) {
        t = tok(rng);
        continue;
      }
      Sampler& s = *samplers[static_cast<size_t>(i)];
      t = s.sample(logits.data() + static_cast<size_t>(i) * static_cast<size_t>(V));
      const bool eog = t >= 0 && m.has_tokenizer() && m.tokenizer().is_eog(t);
      if (t >= 0 && !eog) s.accept(t);
      if (t < 0 || eog || (s.constraint() && s.constraint()->complete())) {
        samplers[static_cast<size_t>(i)] = new_sampler(m, *sp, i);  // the next request
        ++sp->restarts;
        if (t < 0) t = tok(rng);
      }
    }
    t_sample += now_seconds() - ts;
    cpu_sample += thread_cpu_seconds() - cs;
    STRATA_TRY(reserve(pool, ptrs, 1));
    STRATA_TRY(m.forward(ptrs, TokenBatch{tokens, seq}, logits.data()));
  }
  return RunTimes{t_pp, now_seconds() - t0, t_sample, cpu_sample};
}

}  // namespace

Result<std::vector<BatchedBenchRow>> batched_bench(const Model& m, const std::vector<int>& npl, int npp,
                                                   int ntg, int reps, const KvTypes& kv,
                                                   const SeqKnobs& knobs, const EngineOptions* paged,
                                                   BatchedSampling* sampling) {
  std::vector<BatchedBenchRow> rows;
  std::mt19937 rng(1234);
  for (int b : npl) {
    if (b < 1 || b > 4096) return err("-npl %d must be in 1..4096", b);
    const int n_ctx = std::max(npp + ntg, 1);
    std::unique_ptr<KvPool> pool;
    if (paged) {
      EngineOptions eo = *paged;
      eo.n_slots = b;
      STRATA_ASSIGN(pool, make_kv_pool(m, n_ctx, kv, eo));
    }
    std::vector<std::unique_ptr<Session>> sess;
    for (int i = 0; i < b; ++i) {
      STRATA_ASSIGN(auto s, m.new_session({.n_ctx = n_ctx, .n_batch = 512, .kv = kv, .kv_pool = pool.get()}));
      s->set_knobs(knobs);
      sess.push_back(std::move(s));
    }
    std::vector<double> tp, tt, tsm, csm;
    for (int r = -1; r < reps; ++r) {
      STRATA_ASSIGN(auto t, run_once(m, sess, pool.get(), npp, ntg, rng, sampling));
      if (r < 0) continue;  // warm-up
      tp.push_back(t.t_pp);
      tt.push_back(t.t_tg);
      tsm.push_back(t.t_sample);
      csm.push_back(t.cpu_sample);
    }
    BatchedBenchRow row{npp,
                        ntg,
                        b,
                        summarize(tp).median,
                        summarize(tt).median,
                        summarize(tsm).median,
                        summarize(csm).median,
                        std::nullopt};
    if (pool) row.kv = pool->stats();
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string batched_bench_table(const std::vector<BatchedBenchRow>& rows) {
  std::string o =
      "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n"
      "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|"
      "\n";
  char line[256];
  for (const auto& r : rows) {
    const double t = r.t_pp + r.t_tg;
    const int n_kv = r.npl * (r.npp + r.ntg);
    std::snprintf(line, sizeof line,
                  "| %5d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", r.npp, r.ntg,
                  r.npl, n_kv, r.t_pp, r.s_pp(), r.t_tg, r.s_tg(), t, t > 0 ? n_kv / t : 0.0);
    o += line;
  }
  return o;
}

nlohmann::json batched_bench_json(const std::vector<BatchedBenchRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows)
    a.push_back({{"pp", r.npp},
                 {"tg", r.ntg},
                 {"pl", r.npl},
                 {"n_kv", r.npl * (r.npp + r.ntg)},
                 {"t_pp", r.t_pp},
                 {"speed_pp", r.s_pp()},
                 {"t_tg", r.t_tg},
                 {"speed_tg", r.s_tg()},
                 {"s_pp", r.s_pp()},
                 {"s_tg", r.s_tg()},
                 {"t_sample", r.t_sample},
                 {"cpu_sample", r.cpu_sample},
                 {"kv", r.kv ? server::kv_json(*r.kv) : nlohmann::json(nullptr)}});
  return a;
}

}  // namespace strata::cli
