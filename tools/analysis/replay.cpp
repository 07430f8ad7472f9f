// Trace replay and Belady's optimum (replay.h).
#include "analysis/replay.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <set>
#include <utility>

namespace strata {

namespace {

size_t key_index(const RoutingTraceMeta& m, int layer, int expert) {
  return static_cast<size_t>(layer) * static_cast<size_t>(m.n_experts) + static_cast<size_t>(expert);
}

int64_t count_tokens(const RoutingTrace& t) {
  int64_t n = 0, last = -1;
  for (const RoutingRecord& r : t.records) {
    if (r.token_idx != last) ++n;
    last = r.token_idx;
  }
  return n;
}

bool in_line_before(const RoutingRecord& r, size_t j, int32_t expert) {
  for (size_t i = 0; i < j; ++i)
    if (r.experts[i] == expert) return true;
  return false;
}

}  // namespace

Status replay_check_slots(const RoutingTrace& t, int64_t slots) {
  if (slots < 1) return err("replay: --slots %lld must be >= 1", (long long)slots);
  size_t k = 0;
  for (const RoutingRecord& r : t.records) k = std::max(k, r.experts.size());
  if (static_cast<uint64_t>(slots) < k)
    return err("replay: %lld slots cannot hold one layer's %zu routed experts (the minimum is %zu slots)",
               (long long)slots, k, k);
  return {};
}

Result<ReplayResult> replay_policy(const RoutingTrace& t, ExpertPolicy& policy, int64_t slots) {
  STRATA_TRY(replay_check_slots(t, slots));
  const RoutingTraceMeta& m = t.meta;
  ReplayResult res;
  res.policy = policy.name();
  res.slots = slots;
  res.tokens = count_tokens(t);
  const size_t n_keys = static_cast<size_t>(m.n_layers) * static_cast<size_t>(m.n_experts);
  std::vector<int64_t> pos(n_keys, -1);  // index in `resident`, -1 if not resident
  std::vector<ExpertKey> resident;
  std::vector<ExpertKey> cand;
  std::vector<size_t> cand_pos;
  resident.reserve(static_cast<size_t>(std::min<int64_t>(slots, static_cast<int64_t>(n_keys))));
  for (const RoutingRecord& r : t.records) {
    const uint64_t tick = static_cast<uint64_t>(r.token_idx);
    for (size_t j = 0; j < r.experts.size(); ++j) {
      const ExpertKey k{r.layer, r.experts[j]};
      const size_t ki = key_index(m, k.layer, k.expert);
      ++res.accesses;
      policy.on_access(k, tick);
      if (pos[ki] >= 0) {
        ++res.hits;
        continue;
      }
      ++res.misses;
      if (static_cast<int64_t>(resident.size()) < slots) {
        pos[ki] = static_cast<int64_t>(resident.size());
        resident.push_back(k);
        policy.on_insert(k, tick);
        continue;
      }
      if (!policy.admit(k, tick)) {
        ++res.streamed;
        continue;
      }
      cand.clear();
      cand_pos.clear();
      for (size_t i = 0; i < resident.size(); ++i) {
        const ExpertKey& c = resident[i];
        if (c.layer == r.layer && in_line_before(r, j, c.expert)) continue;  // pinned by this line
        cand.push_back(c);
        cand_pos.push_back(i);
      }
      if (cand.empty()) {  // only when slots == k: nothing evictable, stream it
        ++res.streamed;
        continue;
      }
      const size_t v = policy.choose_victim(cand, tick);
      STRATA_ASSERT(v < cand.size());
      const size_t slot = cand_pos[v];
      const ExpertKey old = resident[slot];
      policy.on_evict(old);
      pos[key_index(m, old.layer, old.expert)] = -1;
      ++res.evictions;
      resident[slot] = k;
      pos[ki] = static_cast<int64_t>(slot);
      policy.on_insert(k, tick);
    }
  }
  return res;
}

Result<ReplayResult> replay_named(const RoutingTrace& t, std::string_view name, int64_t slots,
                                  PolicyOptions opts) {
  if (opts.n_layers == 0) opts.n_layers = t.meta.n_layers;
  if (opts.n_experts == 0) opts.n_experts = t.meta.n_experts;
  if (name == "static" && opts.static_hot.empty()) {
    opts.static_hot = replay_hot_keys(t);
    if (static_cast<int64_t>(opts.static_hot.size()) > slots)
      opts.static_hot.resize(static_cast<size_t>(slots));
  }
  STRATA_ASSIGN(auto policy, make_expert_policy(name, opts));
  return replay_policy(t, *policy, slots);
}

Result<ReplayResult> replay_belady(const RoutingTrace& t, int64_t slots) {
  STRATA_TRY(replay_check_slots(t, slots));
  const RoutingTraceMeta& m = t.meta;
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();  // not requested again
  constexpr int64_t kNone = -1;
  // Flatten the requests and find, for each, the position of the same key's next request.
  std::vector<size_t> keys;
  for (const RoutingRecord& r : t.records)
    for (int32_t e : r.experts) keys.push_back(key_index(m, r.layer, e));
  const size_t n_keys = static_cast<size_t>(m.n_layers) * static_cast<size_t>(m.n_experts);
  std::vector<int64_t> next(keys.size());
  {
    std::vector<int64_t> seen(n_keys, kNever);
    for (size_t i = keys.size(); i-- > 0;) {
      next[i] = seen[keys[i]];
      seen[keys[i]] = static_cast<int64_t>(i);
    }
  }
  ReplayResult res;
  res.policy = "belady";
  res.slots = slots;
  res.tokens = count_tokens(t);
  // Residents ordered by next request; ties broken by key so the set holds each key once.
  std::set<std::pair<int64_t, size_t>> by_next;
  std::vector<int64_t> cur(n_keys, kNone);  // next request of a resident key; kNone: not resident
  size_t a = 0;
  auto make_resident = [&](size_t ki, int64_t nx) {
    cur[ki] = nx;
    by_next.insert({nx, ki});
  };
  for (const RoutingRecord& r : t.records) {
    for (size_t j = 0; j < r.experts.size(); ++j, ++a) {
      const size_t ki = keys[a];
      ++res.accesses;
      if (cur[ki] != kNone) {
        ++res.hits;
        by_next.erase({cur[ki], ki});
        make_resident(ki, next[a]);
        continue;
      }
      ++res.misses;
      if (static_cast<int64_t>(by_next.size()) < slots) {
        make_resident(ki, next[a]);
        continue;
      }
      auto it = std::prev(by_next.end());  // the resident requested farthest in the future
      if (it->first <= next[a]) {          // the requested one is needed last: stream it
        ++res.streamed;
        continue;
      }
      cur[it->second] = kNone;
      by_next.erase(it);
      ++res.evictions;
      make_resident(ki, next[a]);
    }
  }
  return res;
}

std::vector<ExpertKey> replay_hot_keys(const RoutingTrace& t) {
  const auto counts = routing_trace_counts(t);
  std::vector<std::pair<uint64_t, ExpertKey>> v;
  for (int l = 0; l < t.meta.n_layers; ++l)
    for (int e = 0; e < t.meta.n_experts; ++e)
      if (counts[l][e] > 0) v.push_back({counts[l][e], ExpertKey{l, e}});
  std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<ExpertKey> out;
  out.reserve(v.size());
  for (const auto& p : v) out.push_back(p.second);
  return out;
}

int64_t replay_slots_for_fraction(const RoutingTrace& t, double frac) {
  const double all = static_cast<double>(t.meta.n_layers) * static_cast<double>(t.meta.n_experts);
  const int64_t s = static_cast<int64_t>(std::llround(all * frac));
  return std::max<int64_t>(s, std::max(1, t.meta.top_k));
}

}  // namespace strata
