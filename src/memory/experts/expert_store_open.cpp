// expert_store_open: the store with the policy named in the options (kept apart from
// expert_store.cpp so code that injects its own policy does not link the policy set).
#include <unistd.h>

#include "memory/experts/expert_store.h"

namespace strata {

Result<std::unique_ptr<ExpertStore>> expert_store_open(const GgufFile& f, int n_layer, int n_expert,
                                                       int n_used, const ExpertStoreOptions& o) {
  std::unique_ptr<ExpertPolicy> policy;
  if (o.budget_bytes > 0) {
    PolicyOptions po;
    po.n_layers = n_layer;
    po.n_experts = n_expert;
    // A profile that does not exist yet is written at exit (counts of this run).
    if (!o.profile_path.empty() && ::access(o.profile_path.c_str(), F_OK) == 0) {
      std::vector<uint64_t> counts(static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert), 0);
      STRATA_ASSIGN(po.static_hot, expert_profile_load(o.profile_path, n_layer, n_expert, &counts));
      int layers = 0;  // layers the profile saw (dense layers have none)
      for (int l = 0; l < n_layer; ++l)
        for (int e = 0; e < n_expert; ++e)
          if (counts[static_cast<size_t>(l) * n_expert + e]) {
            ++layers;
            break;
          }
      po.seed_counts = expert_profile_seed(counts, static_cast<double>(layers) * n_used * po.rerank_interval);
    }
    if (o.policy == "static" && po.static_hot.empty())
      return err(
          "--expert-policy static needs --expert-profile FILE with activation counts (the hot set); "
          "record one first, e.g. with --expert-policy adaptive --expert-profile FILE");
    STRATA_ASSIGN(policy, make_expert_policy(o.policy, po));
  }
  return ExpertStore::open(f, n_layer, n_expert, n_used, o, std::move(policy));
}

}  // namespace strata
