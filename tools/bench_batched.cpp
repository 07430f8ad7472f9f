#include "bench_batched.h"

#include <algorithm>
#include <cstdio>
#include <random>

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

// One PP + TG run of npl sequences; returns (t_pp, t_tg).
Result<std::pair<double, double>> run_once(const Model& m, std::vector<std::unique_ptr<Session>>& sess,
                                           KvPool* pool, int npp, int ntg, std::mt19937& rng) {
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
  t0 = now_seconds();
  for (int step = 0; step < ntg; ++step) {
    for (auto& t : tokens) t = tok(rng);
    STRATA_TRY(reserve(pool, ptrs, 1));
    STRATA_TRY(m.forward(ptrs, TokenBatch{tokens, seq}, logits.data()));
  }
  return std::make_pair(t_pp, now_seconds() - t0);
}

}  // namespace

Result<std::vector<BatchedBenchRow>> batched_bench(const Model& m, const std::vector<int>& npl, int npp,
                                                   int ntg, int reps, const KvTypes& kv,
                                                   const SeqKnobs& knobs, const EngineOptions* paged) {
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
    std::vector<double> tp, tt;
    for (int r = -1; r < reps; ++r) {
      STRATA_ASSIGN(auto t, run_once(m, sess, pool.get(), npp, ntg, rng));
      if (r < 0) continue;  // warm-up
      tp.push_back(t.first);
      tt.push_back(t.second);
    }
    BatchedBenchRow row{npp, ntg, b, summarize(tp).median, summarize(tt).median, std::nullopt};
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
                 {"kv", r.kv ? server::kv_json(*r.kv) : nlohmann::json(nullptr)}});
  return a;
}

}  // namespace strata::cli
