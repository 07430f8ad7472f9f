// lru: evict the resident expert whose last request is oldest. Recency is an internal sequence
// number, not the tick, so the experts of one token are ordered too (a token's layers run in order).
#include <vector>

#include "memory/experts/expert_policy_table.h"

namespace strata::policy_detail {

namespace {

class LruPolicy final : public ExpertPolicy {
 public:
  explicit LruPolicy(const PolicyOptions& o) {
    keys_.init(o);
    last_.assign(keys_.size(), 0);
  }
  const char* name() const override { return "lru"; }
  void on_access(ExpertKey k, uint64_t) override { last_[keys_.index(k)] = ++seq_; }
  void on_insert(ExpertKey k, uint64_t) override {
    uint64_t& l = last_[keys_.index(k)];
    if (l == 0) l = ++seq_;  // inserted by a prefetch before any request: as recent as now
  }
  void on_evict(ExpertKey) override {}
  size_t choose_victim(std::span<const ExpertKey> c, uint64_t) override {
    STRATA_ASSERT(!c.empty());
    size_t best = 0;
    uint64_t best_t = last_[keys_.index(c[0])];
    for (size_t i = 1; i < c.size(); ++i) {
      const uint64_t t = last_[keys_.index(c[i])];
      if (t < best_t) best = i, best_t = t;
    }
    return best;
  }
  double score(ExpertKey k, uint64_t) const override { return static_cast<double>(last_[keys_.index(k)]); }

 private:
  KeyTable keys_;
  std::vector<uint64_t> last_;  // [n_layers * n_experts] sequence number of the last request (0: never)
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<ExpertPolicy> make_lru(const PolicyOptions& o) {
  return std::make_unique<LruPolicy>(o);
}

}  // namespace strata::policy_detail
