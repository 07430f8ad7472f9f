// make_expert_policy: the name -> policy table and the option checks every policy relies on.
#include <cmath>
#include <string>

#include "memory/experts/expert_policy.h"
#include "memory/experts/expert_policy_table.h"

namespace strata {

std::vector<double> expert_profile_seed(const std::vector<uint64_t>& counts, double weight) {
  double total = 0.0;
  for (uint64_t c : counts) total += static_cast<double>(c);
  if (total <= 0.0) return {};
  const double scale = weight / total;
  std::vector<double> seed(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) seed[i] = static_cast<double>(counts[i]) * scale;
  return seed;
}

Result<std::unique_ptr<ExpertPolicy>> make_expert_policy(std::string_view name, const PolicyOptions& opts) {
  if (opts.n_layers <= 0 || opts.n_experts <= 0)
    return err("expert policy '%.*s': n_layers (%d) and n_experts (%d) must be > 0", (int)name.size(),
               name.data(), opts.n_layers, opts.n_experts);
  if (static_cast<int64_t>(opts.n_layers) * opts.n_experts > (int64_t{1} << 26))
    return err("expert policy: %d layers x %d experts is too many", opts.n_layers, opts.n_experts);
  if (!(opts.decay_half_life > 0.0) || !std::isfinite(opts.decay_half_life))
    return err("expert policy: decay half-life %g must be a positive number of tokens", opts.decay_half_life);
  if (opts.rerank_interval < 1)
    return err("expert policy: rerank interval %d must be >= 1 token", opts.rerank_interval);
  if (!opts.seed_counts.empty()) {
    if (opts.seed_counts.size() != static_cast<size_t>(opts.n_layers) * static_cast<size_t>(opts.n_experts))
      return err("expert policy: %zu seed counts for %d layers x %d experts", opts.seed_counts.size(),
                 opts.n_layers, opts.n_experts);
    for (double c : opts.seed_counts)
      if (!(c >= 0.0) || !std::isfinite(c)) return err("expert policy: seed count %g is not a count", c);
  }
  if (name == "lru") return policy_detail::make_lru(opts);
  if (name == "lfu") return policy_detail::make_lfu(opts);
  if (name == "adaptive") return policy_detail::make_adaptive(opts);
  if (name == "static") {
    if (opts.static_hot.empty())
      return err("expert policy 'static' needs a hot set (an expert profile); none was given");
    for (const ExpertKey& k : opts.static_hot) {
      if (k.layer < 0 || k.layer >= opts.n_layers || k.expert < 0 || k.expert >= opts.n_experts)
        return err(
            "expert policy 'static': hot-set entry (layer %d, expert %d) is outside %d layers x %d experts",
            k.layer, k.expert, opts.n_layers, opts.n_experts);
    }
    return policy_detail::make_static(opts);
  }
  return err("unknown expert policy '%.*s' (expected lru, lfu, static or adaptive)", (int)name.size(),
             name.data());
}

}  // namespace strata
