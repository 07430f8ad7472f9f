// Dense per-(layer, expert) state shared by the policy implementations (expert_policy_*.cpp).
// Keys index a [n_layers * n_experts] array, so a policy never allocates after construction
// (the store calls it inside a decode step).
#pragma once

#include <span>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/assert.h"
#include "memory/experts/expert_policy.h"

namespace strata::policy_detail {

struct KeyTable {
  int n_layers = 0, n_experts = 0;

  void init(const PolicyOptions& o) {
    n_layers = o.n_layers;
    n_experts = o.n_experts;
  }
  size_t size() const { return static_cast<size_t>(n_layers) * static_cast<size_t>(n_experts); }
  // PRECOND: 0 <= layer < n_layers, 0 <= expert < n_experts (the store and replay check input).
  size_t index(ExpertKey k) const {
    STRATA_ASSERT(k.layer >= 0 && k.layer < n_layers && k.expert >= 0 && k.expert < n_experts);
    return static_cast<size_t>(k.layer) * static_cast<size_t>(n_experts) + static_cast<size_t>(k.expert);
  }
};

// An exponentially decayed counter: value(t) = count * 2^-((t - t0) / half_life). Updating with
// `add` first decays to t, so counts are comparable whatever their last update time.
struct DecayedCount {
  double count = 0.0;
  uint64_t t0 = 0;

  double value(uint64_t t, double half_life) const {
    if (count == 0.0 || t <= t0) return count;
    return count * std::exp2(-static_cast<double>(t - t0) / half_life);
  }
  void add(uint64_t t, double half_life, double x) {
    count = value(t, half_life) + x;
    if (t > t0) t0 = t;
  }
};

// The least valuable candidate: lowest decayed count, ties to the least recently used (lfu and
// adaptive share this rule). count / last are indexed by keys.index().
inline size_t coldest_candidate(std::span<const ExpertKey> c, const KeyTable& keys,
                                const std::vector<DecayedCount>& count, const std::vector<uint64_t>& last,
                                uint64_t tick, double half_life) {
  size_t best = 0;
  double best_v = 0;
  uint64_t best_t = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const size_t j = keys.index(c[i]);
    const double v = count[j].value(tick, half_life);
    if (i == 0 || v < best_v || (v == best_v && last[j] < best_t)) best = i, best_v = v, best_t = last[j];
  }
  return best;
}

// Constructors of the four policies (one file each); make_expert_policy validates opts first.
std::unique_ptr<ExpertPolicy> make_lru(const PolicyOptions& o);
std::unique_ptr<ExpertPolicy> make_lfu(const PolicyOptions& o);
std::unique_ptr<ExpertPolicy> make_static(const PolicyOptions& o);
std::unique_ptr<ExpertPolicy> make_adaptive(const PolicyOptions& o);

}  // namespace strata::policy_detail
