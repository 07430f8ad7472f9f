// static: a fixed hot set from a profile (PolicyOptions::static_hot, hottest first), as
// KTransformers pins experts. Only hot experts take slots; the rest are streamed through a
// transient buffer (admit == false). When more hot experts are requested than fit, the
// lowest-priority one goes first; a non-hot resident (possible only if the store inserted one
// into a free slot) goes before any hot one, least recently used first.
#include <limits>
#include <vector>

#include "memory/experts/expert_policy_table.h"

namespace strata::policy_detail {

namespace {

constexpr uint32_t kCold = std::numeric_limits<uint32_t>::max();

class StaticPolicy final : public ExpertPolicy {
 public:
  explicit StaticPolicy(const PolicyOptions& o) {
    keys_.init(o);
    rank_.assign(keys_.size(), kCold);
    last_.assign(keys_.size(), 0);
    uint32_t r = 0;
    for (const ExpertKey& k : o.static_hot) {
      uint32_t& x = rank_[keys_.index(k)];
      if (x == kCold) x = r++;  // a duplicate keeps its first (higher) priority
    }
  }
  const char* name() const override { return "static"; }
  void on_access(ExpertKey k, uint64_t) override { last_[keys_.index(k)] = ++seq_; }
  void on_insert(ExpertKey, uint64_t) override {}
  void on_evict(ExpertKey) override {}
  bool admit(ExpertKey k, uint64_t) override { return rank_[keys_.index(k)] != kCold; }
  size_t choose_victim(std::span<const ExpertKey> c, uint64_t) override {
    STRATA_ASSERT(!c.empty());
    size_t best = 0;
    for (size_t i = 1; i < c.size(); ++i) {
      const size_t a = keys_.index(c[i]), b = keys_.index(c[best]);
      // cold before hot; among cold the least recent; among hot the lowest priority
      const bool better =
          rank_[a] == kCold ? (rank_[b] != kCold || last_[a] < last_[b]) : rank_[a] > rank_[b];
      if (better) best = i;
    }
    return best;
  }
  double score(ExpertKey k, uint64_t) const override {
    const uint32_t r = rank_[keys_.index(k)];
    return r == kCold ? 0.0 : static_cast<double>(keys_.size() - r);
  }

 private:
  KeyTable keys_;
  std::vector<uint32_t> rank_;  // [n_layers * n_experts] position in the hot set, kCold if absent
  std::vector<uint64_t> last_;  // recency, to order cold residents
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<ExpertPolicy> make_static(const PolicyOptions& o) {
  return std::make_unique<StaticPolicy>(o);
}

}  // namespace strata::policy_detail
