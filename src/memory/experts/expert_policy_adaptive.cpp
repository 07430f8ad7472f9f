// adaptive (the default): "re-count periodically, update the hot set" (deployer-needs.md).
//
// Every expert, resident or not, has an exponentially decayed request count (half-life
// decay_half_life tokens). Every rerank_interval tokens the policy ranks all experts by it and
// calls the top R the hot set, R = the most experts ever resident at once (the cache size once it
// has filled). Then:
//  * victims: the resident with the lowest count now (ties: the least recently requested);
//  * admission: a missed expert takes a slot only if it is hot, or has become as hot as the
//    coldest hot expert was at the last re-rank (decayed alike, so comparable); otherwise it is
//    streamed through a transient buffer. Until the first re-rank everything is admitted.
//  * seeded from a profile (PolicyOptions::seed_counts): the first re-rank is at the first request.
// Unlike lfu the counts survive eviction, so an expert that was hot a while ago comes back hot.
#include <algorithm>
#include <vector>

#include "memory/experts/expert_policy_table.h"

namespace strata::policy_detail {

namespace {

class AdaptivePolicy final : public ExpertPolicy {
 public:
  explicit AdaptivePolicy(const PolicyOptions& o)
      : half_life_(o.decay_half_life), interval_(o.rerank_interval) {
    keys_.init(o);
    const size_t n = keys_.size();
    count_.assign(n, DecayedCount{});
    for (size_t i = 0; i < o.seed_counts.size(); ++i) count_[i].count = o.seed_counts[i];
    last_.assign(n, 0);
    hot_.assign(n, 0);
    order_.resize(n);
    values_.resize(n);
    // Seeded from a profile: rank at the first request (the store has warm-started the hot set).
    next_rerank_ = o.seed_counts.empty() ? static_cast<uint64_t>(interval_) : 0;
  }
  const char* name() const override { return "adaptive"; }

  void on_access(ExpertKey k, uint64_t tick) override {
    if (tick >= next_rerank_) rerank(tick);
    const size_t i = keys_.index(k);
    count_[i].add(tick, half_life_, 1.0);
    last_[i] = ++seq_;
  }
  void on_insert(ExpertKey, uint64_t) override {
    ++resident_;
    max_resident_ = std::max(max_resident_, resident_);
  }
  void on_evict(ExpertKey) override {
    if (resident_ > 0) --resident_;
  }
  bool admit(ExpertKey k, uint64_t tick) override {
    if (!ranked_) return true;
    const size_t i = keys_.index(k);
    if (hot_[i]) return true;
    const double thr = threshold_.value(tick, half_life_);
    return count_[i].value(tick, half_life_) >= thr;
  }
  size_t choose_victim(std::span<const ExpertKey> c, uint64_t tick) override {
    STRATA_ASSERT(!c.empty());
    return coldest_candidate(c, keys_, count_, last_, tick, half_life_);
  }
  double score(ExpertKey k, uint64_t tick) const override {
    return count_[keys_.index(k)].value(tick, half_life_);
  }

 private:
  // Ranks all experts by decayed count at `tick`; O(n) with nth_element over preallocated arrays.
  void rerank(uint64_t tick) {
    next_rerank_ = tick + static_cast<uint64_t>(interval_);
    const size_t n = keys_.size();
    const size_t r = std::min(n, max_resident_);
    std::fill(hot_.begin(), hot_.end(), 0);
    ranked_ = r > 0;
    if (!ranked_) return;
    for (size_t i = 0; i < n; ++i) {
      order_[i] = static_cast<uint32_t>(i);
      values_[i] = count_[i].value(tick, half_life_);
    }
    auto hotter = [&](uint32_t a, uint32_t b) {
      return values_[a] > values_[b] || (values_[a] == values_[b] && a < b);
    };
    std::nth_element(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(r - 1), order_.end(),
                     hotter);
    double coldest = values_[order_[r - 1]];
    for (size_t i = 0; i < r; ++i) hot_[order_[i]] = 1;
    threshold_ = DecayedCount{coldest, tick};
    // An expert never requested is not worth a slot even if the hot set is larger than the
    // requested set: keep the threshold above zero.
    if (coldest <= 0.0) threshold_.count = 1e-300;
  }

  KeyTable keys_;
  double half_life_;
  int interval_;
  std::vector<DecayedCount> count_;  // [n_layers * n_experts] decayed requests (kept across eviction)
  std::vector<uint64_t> last_;       // recency, for ties
  std::vector<uint8_t> hot_;         // in the hot set of the last re-rank
  std::vector<uint32_t> order_;      // re-rank scratch
  std::vector<double> values_;       // re-rank scratch
  DecayedCount threshold_;           // count of the coldest hot expert at the last re-rank
  uint64_t seq_ = 0, next_rerank_ = 0;
  size_t resident_ = 0, max_resident_ = 0;
  bool ranked_ = false;
};

}  // namespace

std::unique_ptr<ExpertPolicy> make_adaptive(const PolicyOptions& o) {
  return std::make_unique<AdaptivePolicy>(o);
}

}  // namespace strata::policy_detail
