// Which resident expert to evict: the policy interface shared by the live expert store
// (memory/expert_store) and the trace simulator (`strata replay`), so a policy designed on
// recorded routing traces is exactly the one that runs.
//
// Time is logical: `tick` counts tokens (one decode step or one prompt token), so policies
// age by tokens, not wall time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace strata {

struct ExpertKey {
  int32_t layer = 0;
  int32_t expert = 0;
  bool operator==(const ExpertKey&) const = default;
  uint64_t packed() const {
    return (static_cast<uint64_t>(static_cast<uint32_t>(layer)) << 32) | static_cast<uint32_t>(expert);
  }
};

struct PolicyOptions {
  int n_layers = 0;
  int n_experts = 0;               // per layer
  double decay_half_life = 256.0;  // lfu aging / adaptive: tokens for a count to halve
  int rerank_interval = 64;        // adaptive: tokens between hot-set re-ranks
  // static: the hot set, (layer, expert) keys in priority order (from --expert-profile).
  std::vector<ExpertKey> static_hot;
  // lfu / adaptive: initial decayed counts, [n_layers * n_experts] or empty (from --expert-profile,
  // scaled by expert_profile_seed). Adaptive with seeds ranks its hot set at the first request
  // instead of after rerank_interval tokens.
  std::vector<double> seed_counts;
};

class ExpertPolicy {
 public:
  virtual ~ExpertPolicy() = default;
  virtual const char* name() const = 0;

  // k was requested at `tick` (whether it hit or missed). Called once per (token, layer, expert).
  virtual void on_access(ExpertKey k, uint64_t tick) = 0;
  // k became resident / stopped being resident.
  virtual void on_insert(ExpertKey k, uint64_t tick) = 0;
  virtual void on_evict(ExpertKey k) = 0;
  // Choose the victim among evictable resident experts (never pinned, never being filled).
  // PRECOND: !candidates.empty(). Returns an index into candidates.
  virtual size_t choose_victim(std::span<const ExpertKey> candidates, uint64_t tick) = 0;
  // Should a missed expert take a resident slot (possibly evicting), or be streamed through a
  // transient buffer and dropped after use? (static keeps its hot set; the others admit all.)
  virtual bool admit(ExpertKey k, uint64_t tick) { return true; }
  // Current estimate of how valuable k is to keep (higher = hotter); for prefetch priority and
  // profiles. Default 0.
  virtual double score(ExpertKey k, uint64_t tick) const { return 0.0; }
};

// Seeds for PolicyOptions::seed_counts from profile counts ([n_layers * n_experts]): scaled to sum
// to `weight` requests (e.g. one re-rank interval's worth of this run's requests), so the profile
// orders the warm-started hot set and breaks ties early on, and this run's own requests take over
// within that many. A profile is another run's context, and hot sets move with the context
// (measured: a static hot set from another prompt's profile hits less than lru). All zero → empty.
std::vector<double> expert_profile_seed(const std::vector<uint64_t>& counts, double weight);

// "lru" | "lfu" | "static" | "adaptive". Error names the unknown policy.
Result<std::unique_ptr<ExpertPolicy>> make_expert_policy(std::string_view name, const PolicyOptions& opts);

}  // namespace strata
