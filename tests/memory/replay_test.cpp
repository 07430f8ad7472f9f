// Trace replay: known small cases, Belady == brute-force optimum on tiny traces, and Belady >=
// every policy on random skewed traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include "analysis/replay.h"

namespace strata {
namespace {

RoutingTrace make_trace(int n_layers, int n_experts,
                        const std::vector<std::pair<int, std::vector<int32_t>>>& lines,
                        bool one_token_per_line = true) {
  RoutingTrace t;
  t.meta = {n_layers, n_experts, 0};
  int64_t tok = 0;
  for (const auto& [layer, ex] : lines) {
    RoutingRecord r;
    r.token_idx = tok;
    r.layer = layer;
    r.experts = ex;
    t.meta.top_k = std::max(t.meta.top_k, static_cast<int>(ex.size()));
    t.records.push_back(r);
    if (one_token_per_line || layer == n_layers - 1) ++tok;
  }
  return t;
}

// A B C A B C ... on 2 slots: LRU always evicts the one needed next (0 hits); Belady keeps two
// and streams the third.
TEST(Replay, CyclicThrash) {
  std::vector<std::pair<int, std::vector<int32_t>>> lines;
  for (int i = 0; i < 9; ++i) lines.push_back({0, {i % 3}});
  const RoutingTrace t = make_trace(1, 3, lines);
  auto lru = replay_named(t, "lru", 2, {});
  ASSERT_TRUE(lru.ok()) << lru.message();
  EXPECT_EQ(lru->hits, 0u);
  EXPECT_EQ(lru->misses, 9u);
  EXPECT_EQ(lru->evictions, 7u);
  auto opt = replay_belady(t, 2);
  ASSERT_TRUE(opt.ok());
  // A B C(stream) A B C(stream) A B C: hits at 3, 4, 6, 7
  EXPECT_EQ(opt->hits, 4u);
  EXPECT_EQ(opt->streamed, 3u);
  EXPECT_EQ(opt->evictions, 0u);
  EXPECT_EQ(opt->tokens, 9);
  EXPECT_NEAR(opt->hit_rate(), 4.0 / 9.0, 1e-12);
}

TEST(Replay, LfuKeepsTheFrequentOne) {
  // A is requested every other token; B, C, D each once in between.
  const RoutingTrace t =
      make_trace(1, 4, {{0, {0}}, {0, {1}}, {0, {0}}, {0, {2}}, {0, {0}}, {0, {3}}, {0, {0}}});
  auto lfu = replay_named(t, "lfu", 2, {});
  auto lru = replay_named(t, "lru", 2, {});
  ASSERT_TRUE(lfu.ok() && lru.ok());
  EXPECT_EQ(lfu->hits, 3u);  // A stays
  EXPECT_EQ(lru->hits, 3u);  // A is always the more recent of the two as well
  auto st = replay_named(t, "static", 1, {});
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(st->hits, 3u);  // hot set {A}: B, C, D streamed
  EXPECT_EQ(st->streamed, 3u);
}

TEST(Replay, SlotsBelowTopKIsAnError) {
  const RoutingTrace t = make_trace(2, 8, {{0, {1, 2, 3}}, {1, {0, 4, 5}}});
  auto r = replay_named(t, "lru", 2, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("minimum is 3 slots"), std::string::npos) << r.message();
  EXPECT_FALSE(replay_belady(t, 0).ok());
  EXPECT_EQ(replay_slots_for_fraction(t, 0.1), 3);  // 10% of 16 = 2 -> at least top_k
  EXPECT_EQ(replay_slots_for_fraction(t, 0.5), 8);
}

TEST(Replay, PinnedLineIsNeverEvicted) {
  // 2 slots, top-2 lines: the second expert of a line must not evict the first.
  const RoutingTrace t = make_trace(1, 4, {{0, {0, 1}}, {0, {2, 3}}, {0, {0, 2}}});
  for (const char* p : {"lru", "lfu", "adaptive"}) {
    auto r = replay_named(t, p, 2, {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->accesses, 6u);
  }
  auto opt = replay_belady(t, 2);
  ASSERT_TRUE(opt.ok());
  EXPECT_GE(opt->hits, 1u);
}

// Exhaustive optimum over all eviction / bypass choices (the cache model without line pins, as
// Belady solves it), by DP over (position, resident set).
uint64_t brute_force_best(const RoutingTrace& t, int64_t slots) {
  std::vector<int> keys;
  for (const auto& r : t.records)
    for (int32_t e : r.experts) keys.push_back(r.layer * t.meta.n_experts + e);
  std::map<std::pair<size_t, uint32_t>, uint64_t> memo;
  std::function<uint64_t(size_t, uint32_t)> f = [&](size_t a, uint32_t mask) -> uint64_t {
    if (a == keys.size()) return 0;
    auto it = memo.find({a, mask});
    if (it != memo.end()) return it->second;
    const uint32_t bit = 1u << keys[a];
    uint64_t best;
    if (mask & bit) {
      best = 1 + f(a + 1, mask);
    } else if (__builtin_popcount(mask) < slots) {
      best = f(a + 1, mask | bit);
    } else {
      best = f(a + 1, mask);  // stream
      for (int v = 0; v < 32; ++v)
        if (mask & (1u << v)) best = std::max(best, f(a + 1, (mask & ~(1u << v)) | bit));
    }
    memo[{a, mask}] = best;
    return best;
  };
  return f(0, 0);
}

RoutingTrace random_trace(std::mt19937& rng, int n_layers, int n_experts, int k, int n_tokens, double skew) {
  std::vector<double> w(static_cast<size_t>(n_experts));
  for (int e = 0; e < n_experts; ++e) w[e] = std::pow(e + 1.0, -skew);
  std::vector<std::pair<int, std::vector<int32_t>>> lines;
  for (int tok = 0; tok < n_tokens; ++tok) {
    for (int l = 0; l < n_layers; ++l) {
      std::vector<int32_t> ex;
      std::vector<double> ww = w;
      std::rotate(ww.begin(), ww.begin() + (l * 3) % n_experts, ww.end());  // per-layer favourites
      while (static_cast<int>(ex.size()) < k) {
        std::discrete_distribution<int> d(ww.begin(), ww.end());
        const int e = d(rng);
        ww[e] = 0;
        ex.push_back(e);
      }
      lines.push_back({l, ex});
    }
  }
  return make_trace(n_layers, n_experts, lines, /*one_token_per_line=*/false);
}

TEST(Replay, BeladyMatchesBruteForceOnTinyTraces) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 40; ++iter) {
    const int k = 1 + iter % 2;
    const RoutingTrace t = random_trace(rng, 2, 4, k, 6, 0.8);
    for (int64_t slots = k; slots <= 5; ++slots) {
      auto opt = replay_belady(t, slots);
      ASSERT_TRUE(opt.ok());
      EXPECT_EQ(opt->hits, brute_force_best(t, slots)) << "iter " << iter << " slots " << slots;
    }
  }
}

TEST(Replay, BeladyBeatsEveryPolicyOnRandomTraces) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 12; ++iter) {
    const int n_layers = 2 + iter % 4, n_experts = 8 + 8 * (iter % 3), k = 1 + iter % 4;
    const RoutingTrace t = random_trace(rng, n_layers, n_experts, k, 300, 0.3 * (iter % 5));
    for (double frac : {0.1, 0.25, 0.5, 0.9}) {
      const int64_t slots = replay_slots_for_fraction(t, frac);
      auto opt = replay_belady(t, slots);
      ASSERT_TRUE(opt.ok()) << opt.message();
      for (const char* p : {"lru", "lfu", "static", "adaptive"}) {
        PolicyOptions o;
        o.rerank_interval = 16;
        o.decay_half_life = 64;
        auto r = replay_named(t, p, slots, o);
        ASSERT_TRUE(r.ok()) << r.message();
        EXPECT_EQ(r->accesses, opt->accesses);
        EXPECT_EQ(r->hits + r->misses, r->accesses);
        EXPECT_GE(opt->hits, r->hits) << p << " iter " << iter << " slots " << slots;
      }
    }
  }
}

TEST(Replay, HotKeysByCount) {
  const RoutingTrace t = make_trace(2, 3, {{0, {2}}, {1, {1}}, {0, {2}}, {1, {0}}, {1, {1}}, {0, {2}}});
  const auto hot = replay_hot_keys(t);
  ASSERT_EQ(hot.size(), 3u);
  EXPECT_EQ(hot[0], (ExpertKey{0, 2}));
  EXPECT_EQ(hot[1], (ExpertKey{1, 1}));
  EXPECT_EQ(hot[2], (ExpertKey{1, 0}));
}

}  // namespace
}  // namespace strata
