// Trace replay: how a cache of `slots` resident experts would have done on a recorded routing trace
// under each policy, without running the model; and Belady's offline optimum for the same slots.
//
// The cache model is the live expert store's (memory/expert_store): slots count resident experts
// over all layers; a trace line (token, layer) requests its experts in order and pins them until
// the line ends (a layer's top-k must be resident together, so slots >= top_k); a request that
// misses takes a free slot, else asks the policy to admit it (an expert not admitted is streamed
// through a transient buffer: a miss that evicts nothing) and evicts the policy's victim among
// the unpinned residents. Time (`tick`) is the trace's token_idx.
//
// Belady here is the optimum with bypass: on a miss with a full cache it drops whichever of the
// residents and the requested expert is next requested farthest in the future (never requested
// again = infinitely far). It ignores the line pins (with pins, farthest-first is no longer
// optimal), so it solves a relaxed problem: an upper bound no policy of the model above can beat.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "memory/experts/expert_policy.h"
#include "memory/experts/routing_trace.h"

namespace strata {

struct ReplayResult {
  std::string policy;  // policy name, or "belady"
  int64_t slots = 0;
  uint64_t accesses = 0;  // (token, layer, expert) requests
  uint64_t hits = 0;
  uint64_t misses = 0;     // = accesses - hits; each one reads an expert
  uint64_t streamed = 0;   // misses not admitted to a slot
  uint64_t evictions = 0;  // misses that evicted a resident
  int64_t tokens = 0;      // distinct token_idx values

  double hit_rate() const {
    return accesses ? static_cast<double>(hits) / static_cast<double>(accesses) : 0.0;
  }
  double misses_per_token() const {
    return tokens ? static_cast<double>(misses) / static_cast<double>(tokens) : 0.0;
  }
};

// Errors: slots < the trace's largest expert list (top_k), or slots < 1.
Status replay_check_slots(const RoutingTrace& t, int64_t slots);

// Replays one policy. opts.n_layers / n_experts are taken from the trace when zero.
Result<ReplayResult> replay_policy(const RoutingTrace& t, ExpertPolicy& policy, int64_t slots);
// Makes the named policy (for "static": the hot set is the trace's own top-`slots` experts by
// count, unless opts.static_hot is given) and replays it.
Result<ReplayResult> replay_named(const RoutingTrace& t, std::string_view policy, int64_t slots,
                                  PolicyOptions opts);
Result<ReplayResult> replay_belady(const RoutingTrace& t, int64_t slots);

// The (layer, expert) keys of a trace by request count, hottest first (ties: lower layer, lower
// expert); keys never requested are left out.
std::vector<ExpertKey> replay_hot_keys(const RoutingTrace& t);

// Slots for a fraction of all experts (n_layers * n_experts), at least top_k.
int64_t replay_slots_for_fraction(const RoutingTrace& t, double frac);

}  // namespace strata
