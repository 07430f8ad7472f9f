// Offline predictor evaluation (replay_predict.h).
#include "analysis/replay_predict.h"

#include <algorithm>
#include <list>
#include <unordered_map>

namespace strata {

namespace {

const char* const kPredictors[] = {"lookahead", "history", "union", "agree"};
constexpr int kNumPredictors = 4;

// LRU over (layer, expert) keys: the cache a trace drives.
class Lru {
 public:
  explicit Lru(size_t cap) : cap_(cap) {}
  bool has(uint64_t k) const { return pos_.count(k) != 0; }
  void touch(uint64_t k) {
    auto it = pos_.find(k);
    if (it != pos_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.push_front(k);
    pos_[k] = order_.begin();
    if (order_.size() > cap_) {
      pos_.erase(order_.back());
      order_.pop_back();
    }
  }

 private:
  size_t cap_;
  std::list<uint64_t> order_;
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> pos_;
};

uint64_t key(int layer, int e) {
  return (static_cast<uint64_t>(layer) << 32) | static_cast<uint32_t>(e);
}

}  // namespace

Result<std::vector<PredictScore>> replay_predictors(const RoutingTrace& t, int64_t slots) {
  const int L = t.meta.n_layers, E = t.meta.n_experts;
  if (slots < std::max(1, t.meta.top_k))
    return err("replay: %lld slots cannot hold one layer's top-%d", static_cast<long long>(slots),
               t.meta.top_k);
  int max_depth = 0;
  for (const RoutingRecord& r : t.records)
    max_depth = std::max<int>(max_depth, static_cast<int>(r.lookahead.size()));
  if (max_depth == 0)
    return err(
        "replay: the trace has no look-ahead predictions (record one with run --routing-trace-out and "
        "--expert-budget, --prefetch on)");
  // Index: (token, layer) -> record; tokens in order.
  std::vector<int64_t> tokens;
  std::unordered_map<uint64_t, const RoutingRecord*> at;
  for (const RoutingRecord& r : t.records) {
    if (tokens.empty() || tokens.back() != r.token_idx) tokens.push_back(r.token_idx);
    at[(static_cast<uint64_t>(r.token_idx) << 20) | static_cast<uint64_t>(r.layer)] = &r;
  }
  auto find = [&](int64_t tok, int layer) -> const RoutingRecord* {
    if (tok < 0) return nullptr;
    auto it = at.find((static_cast<uint64_t>(tok) << 20) | static_cast<uint64_t>(layer));
    return it == at.end() ? nullptr : it->second;
  };
  std::vector<PredictScore> out(static_cast<size_t>(kNumPredictors * max_depth));
  for (int p = 0; p < kNumPredictors; ++p)
    for (int d = 1; d <= max_depth; ++d) {
      PredictScore& s = out[static_cast<size_t>(p * max_depth + d - 1)];
      s.predictor = kPredictors[p];
      s.depth = d;
    }
  Lru cache(static_cast<size_t>(slots));
  std::vector<uint8_t> used(static_cast<size_t>(E)), la(static_cast<size_t>(E)), hist(static_cast<size_t>(E));
  std::vector<uint8_t> counted(out.size(), 0);
  int64_t prev_tok = -1;
  for (const RoutingRecord& r : t.records) {  // token order, layers in order within a token
    if (r.token_idx != prev_tok) {
      std::fill(counted.begin(), counted.end(), 0);
      prev_tok = r.token_idx;
    }
    const int Lt = r.layer;
    std::fill(used.begin(), used.end(), 0);
    for (int32_t e : r.experts) used[static_cast<size_t>(e)] = 1;
    const RoutingRecord* before = find(r.token_idx - 1, Lt);
    std::fill(hist.begin(), hist.end(), 0);
    if (before)
      for (int32_t e : before->experts) hist[static_cast<size_t>(e)] = 1;
    for (int d = 1; d <= max_depth && Lt - d >= 0; ++d) {
      const RoutingRecord* src = find(r.token_idx, Lt - d);
      if (!src || static_cast<int>(src->lookahead.size()) < d || !before) continue;
      std::fill(la.begin(), la.end(), 0);
      for (int32_t e : src->lookahead[static_cast<size_t>(d - 1)]) la[static_cast<size_t>(e)] = 1;
      for (int p = 0; p < kNumPredictors; ++p) {
        PredictScore& s = out[static_cast<size_t>(p * max_depth + d - 1)];
        s.targets++;
        uint8_t& c = counted[static_cast<size_t>(p * max_depth + d - 1)];
        if (!c) {
          s.tokens++;
          c = 1;
        }
        for (int e = 0; e < E; ++e) {
          const bool a = la[static_cast<size_t>(e)], h = hist[static_cast<size_t>(e)];
          const bool pred = p == 0 ? a : p == 1 ? h : p == 2 ? (a || h) : (a && h);
          const bool u = used[static_cast<size_t>(e)] != 0;
          const bool resident = cache.has(key(Lt, e));
          s.predicted += pred;
          s.used += u;
          s.true_pos += pred && u;
          if (u && !resident) {
            s.misses++;
            s.misses_covered += pred;
          }
          if (pred && !u && !resident) s.reads_wasted++;
        }
      }
    }
    for (int32_t e : r.experts) cache.touch(key(Lt, e));
  }
  (void)L;
  return out;
}

}  // namespace strata
