// strata replay: simulate expert-cache policies on a recorded routing trace (no model run) and
// print each policy's hit rate next to Belady's offline optimum, per budget. See memory/replay.h
// for the cache model.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "command.h"
#include "memory/experts/expert_stats.h"
#include "memory/experts/heatmap.h"
#include "analysis/replay.h"
#include "analysis/replay_predict.h"

namespace {

int fail(const std::string& msg) {
  std::fprintf(stderr, "strata replay: error: %s\n", msg.c_str());
  return 1;
}

struct Budget {
  std::string label;  // "10%" or "N slots"
  int64_t slots;
};

}  // namespace

static int cmd_replay(int argc, char** argv) {
  std::string trace_path, policy = "all", fracs = "0.1,0.25,0.5", heatmap, profile;
  int64_t slots = 0;
  double half_life = 256.0;
  int rerank = 64;
  bool json = false, log_heat = false;
  CLI::App app{"Simulate expert-cache policies on a routing trace and compare with Belady's optimum",
               "strata replay"};
  app.add_option("--trace", trace_path, "routing trace (JSONL from run --routing-trace-out)")->required();
  app.add_option("--slots", slots, "resident experts over all layers (instead of --budget-frac)");
  app.add_option("--policy", policy, "lru|lfu|static|adaptive|all")->capture_default_str();
  app.add_option("--budget-frac", fracs, "budgets as fractions of all experts, comma-separated")
      ->capture_default_str();
  app.add_option("--half-life", half_life, "lfu/adaptive: tokens for a count to halve")
      ->capture_default_str();
  app.add_option("--rerank-interval", rerank, "adaptive: tokens between hot-set re-ranks")
      ->capture_default_str();
  app.add_option(
      "--profile", profile,
      "static: hot set from this activation profile CSV (run --expert-profile); default: the trace's "
      "own counts");
  app.add_option("--heatmap", heatmap, "also write the trace's per-(layer, expert) counts as an SVG heatmap");
  app.add_flag("--log-heatmap", log_heat, "heatmap colour by log(1 + count)");
  app.add_flag("--json", json, "print JSON instead of tables");
  bool predictors = false;
  app.add_flag(
      "--predictors", predictors,
      "score expert predictors (look-ahead, history, union, agree) by depth on a trace recorded with "
      "the look-ahead, against an LRU cache of each budget");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what()) + 1;
  }
  std::vector<std::string> policies;
  if (policy == "all") {
    policies = {"lru", "lfu", "static", "adaptive"};
  } else {
    if (policy != "lru" && policy != "lfu" && policy != "static" && policy != "adaptive")
      return fail("unknown --policy '" + policy + "' (expected lru, lfu, static, adaptive or all)");
    policies = {policy};
  }
  auto trace = strata::routing_trace_read(trace_path);
  if (!trace.ok()) return fail(trace.message());
  const strata::RoutingTrace& t = *trace;
  const int64_t all = static_cast<int64_t>(t.meta.n_layers) * t.meta.n_experts;

  std::vector<Budget> budgets;
  if (slots != 0) {
    budgets.push_back({std::to_string(slots) + " slots", slots});
  } else {
    std::stringstream ss(fracs);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      const double f = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0' || !(f > 0.0) || f > 1.0)
        return fail("--budget-frac '" + item + "' must be a fraction in (0, 1]");
      char label[32];
      std::snprintf(label, sizeof label, "%g%%", f * 100.0);
      budgets.push_back({label, strata::replay_slots_for_fraction(t, f)});
    }
    if (budgets.empty()) return fail("--budget-frac is empty");
  }

  strata::PolicyOptions opts;
  opts.decay_half_life = half_life;
  opts.rerank_interval = rerank;
  std::vector<strata::ExpertKey> hot;
  if (!profile.empty()) {
    auto h = strata::expert_profile_load(profile, t.meta.n_layers, t.meta.n_experts);
    if (!h.ok()) return fail(h.message());
    hot = std::move(h).value();
    if (hot.empty()) return fail("profile " + profile + " has no activations");
  }
  nlohmann::json out;
  const strata::ReplayResult* first = nullptr;
  std::vector<strata::ReplayResult> keep;
  if (!json) {
    std::printf("trace: %s\n  %zu lines, L=%d layers x E=%d experts (%lld in all), top-k %d\n",
                trace_path.c_str(), t.records.size(), t.meta.n_layers, t.meta.n_experts, (long long)all,
                t.meta.top_k);
    std::printf("  static hot set: %s\n",
                profile.empty() ? "the trace's own counts (an oracle profile)" : profile.c_str());
  }
  for (const Budget& b : budgets) {
    auto opt = strata::replay_belady(t, b.slots);
    if (!opt.ok()) return fail(opt.message());
    if (!first) {
      keep.push_back(*opt);
      first = &keep.back();
      if (!json)
        std::printf(
            "  %lld tokens, %llu expert requests (%.1f per token)\n", (long long)opt->tokens,
            (unsigned long long)opt->accesses,
            opt->tokens ? static_cast<double>(opt->accesses) / static_cast<double>(opt->tokens) : 0.0);
    }
    nlohmann::json jb = {
        {"budget", b.label}, {"slots", b.slots}, {"fraction", static_cast<double>(b.slots) / all}};
    if (!json) {
      std::printf("\nbudget %s: %lld of %lld experts resident\n", b.label.c_str(), (long long)b.slots,
                  (long long)all);
      std::printf("  %-10s %9s %10s %13s %10s %10s\n", "policy", "hit rate", "vs belady", "misses/token",
                  "streamed", "evictions");
    }
    std::vector<strata::ReplayResult> rows;
    for (const std::string& p : policies) {
      strata::PolicyOptions po = opts;
      if (p == "static" && !hot.empty()) {  // the profile's top `slots` experts
        po.static_hot.assign(hot.begin(),
                             hot.begin() + std::min<int64_t>(b.slots, static_cast<int64_t>(hot.size())));
      }
      auto r = strata::replay_named(t, p, b.slots, po);
      if (!r.ok()) return fail(r.message());
      rows.push_back(*r);
    }
    rows.push_back(*opt);
    for (const auto& r : rows) {
      const double rel = opt->hit_rate() > 0 ? r.hit_rate() / opt->hit_rate() : 1.0;
      if (!json) {
        std::printf("  %-10s %8.2f%% %9.1f%% %13.2f %10llu %10llu\n", r.policy.c_str(), 100.0 * r.hit_rate(),
                    100.0 * rel, r.misses_per_token(), (unsigned long long)r.streamed,
                    (unsigned long long)r.evictions);
      }
      jb["results"].push_back({{"policy", r.policy},
                               {"hit_rate", r.hit_rate()},
                               {"vs_belady", rel},
                               {"hits", r.hits},
                               {"misses", r.misses},
                               {"misses_per_token", r.misses_per_token()},
                               {"streamed", r.streamed},
                               {"evictions", r.evictions}});
    }
    out["budgets"].push_back(jb);
  }
  for (const Budget& b : predictors ? budgets : std::vector<Budget>{}) {
    auto ps = strata::replay_predictors(t, b.slots);
    if (!ps.ok()) return fail(ps.message());
    if (!json) {
      std::printf("\npredictors at budget %s (%lld slots, LRU), decode tokens with look-ahead records:\n",
                  b.label.c_str(), (long long)b.slots);
      std::printf("  %-10s %5s %9s %9s %8s %14s %14s %13s\n", "predictor", "depth", "precision", "recall",
                  "tokens", "misses/token", "miss covered", "wasted/token");
    }
    for (const strata::PredictScore& p : *ps) {
      const double mpt = p.tokens ? static_cast<double>(p.misses) / static_cast<double>(p.tokens) : 0.0;
      if (!json)
        std::printf("  %-10s %5d %8.1f%% %8.1f%% %8lld %14.2f %13.1f%% %13.2f\n", p.predictor.c_str(),
                    p.depth, 100.0 * p.precision(), 100.0 * p.recall(), (long long)p.tokens, mpt,
                    100.0 * p.miss_coverage(), p.wasted_per_token());
      out["predictors"].push_back({{"budget", b.label},
                                   {"slots", b.slots},
                                   {"predictor", p.predictor},
                                   {"depth", p.depth},
                                   {"precision", p.precision()},
                                   {"recall", p.recall()},
                                   {"tokens", p.tokens},
                                   {"misses", p.misses},
                                   {"misses_covered", p.misses_covered},
                                   {"miss_coverage", p.miss_coverage()},
                                   {"reads_wasted", p.reads_wasted},
                                   {"wasted_per_token", p.wasted_per_token()}});
    }
  }
  if (!heatmap.empty()) {
    strata::HeatmapOptions ho;
    ho.title = "expert activations: " + trace_path;
    ho.log_scale = log_heat;
    strata::Status st = strata::heatmap_write(heatmap, strata::routing_trace_counts(t), ho);
    if (!st.ok()) return fail(st.message());
    if (!json) std::printf("\nheatmap: %s\n", heatmap.c_str());
  }
  if (json) {
    out["trace"] = trace_path;
    out["static_hot_set"] = profile.empty() ? std::string("trace counts") : profile;
    out["n_layers"] = t.meta.n_layers;
    out["n_experts"] = t.meta.n_experts;
    out["top_k"] = t.meta.top_k;
    out["tokens"] = first ? first->tokens : 0;
    out["accesses"] = first ? first->accesses : 0;
    std::printf("%s\n", out.dump(2).c_str());
  }
  return 0;
}

static const strata::cli::Registrar reg{
    "replay", "simulate expert-cache policies on a routing trace (vs Belady)", &cmd_replay};
