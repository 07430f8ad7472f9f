// expert_store_open: the store with the policy named in the options (kept apart from
// expert_store.cpp so code that injects its own policy does not link the policy set).
#include "memory/expert_store.h"

namespace strata {

Result<std::unique_ptr<ExpertStore>> expert_store_open(const GgufFile& f, int n_layer, int n_expert,
                                                       int n_used, const ExpertStoreOptions& o) {
  std::unique_ptr<ExpertPolicy> policy;
  if (o.budget_bytes > 0) {
    PolicyOptions po;
    po.n_layers = n_layer;
    po.n_experts = n_expert;
    if (!o.profile_path.empty()) {
      STRATA_ASSIGN(po.static_hot, expert_profile_load(o.profile_path, n_layer, n_expert));
    } else if (o.policy == "static") {
      return err("--expert-policy static needs --expert-profile FILE (the hot set)");
    }
    STRATA_ASSIGN(policy, make_expert_policy(o.policy, po));
  }
  return ExpertStore::open(f, n_layer, n_expert, n_used, o, std::move(policy));
}

}  // namespace strata
