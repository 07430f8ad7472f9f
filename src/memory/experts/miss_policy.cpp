#include "memory/experts/miss_policy.h"

#include <algorithm>

namespace strata {

const char* miss_policy_name(MissPolicy p) {
  switch (p) {
    case MissPolicy::miss_auto:
      return "auto";
    case MissPolicy::miss_cpu:
      return "cpu";
    case MissPolicy::miss_copy:
      return "copy";
  }
  return "?";
}

Result<MissPolicy> parse_miss_policy(const std::string& s) {
  for (MissPolicy p : {MissPolicy::miss_auto, MissPolicy::miss_cpu, MissPolicy::miss_copy})
    if (s == miss_policy_name(p)) return p;
  return err("--miss-policy '%s': expected auto, cpu or copy", s.c_str());
}

int miss_bucket(int64_t tokens) {
  int b = 0;
  while (b + 1 < kMissBuckets && (int64_t{2} << b) <= tokens) ++b;
  return b;
}

double MissRateTable::at(int64_t tokens) const {
  const int b = miss_bucket(tokens);
  for (int d = 0; d < kMissBuckets; ++d) {
    if (b - d >= 0 && bytes_per_s[b - d] > 0.0) return bytes_per_s[b - d];
    if (b + d < kMissBuckets && bytes_per_s[b + d] > 0.0) return bytes_per_s[b + d];
  }
  return 0.0;
}

double MissRateTable::best() const {
  double r = 0.0;
  for (double x : bytes_per_s) r = std::max(r, x);
  return r;
}

MissRateTable MissRateTable::flat(double r) {
  MissRateTable t;
  for (double& x : t.bytes_per_s) x = r;
  return t;
}

MissDecision decide_miss(MissPolicy policy, const MissCosts& c, uint64_t bytes, int64_t tokens,
                         bool in_slot) {
  MissDecision d;
  const double b = static_cast<double>(bytes), t = static_cast<double>(std::max<int64_t>(tokens, 0));
  const double cpu_rate = c.cpu.at(tokens), gpu_rate = c.gpu.at(tokens);
  const bool pcie = c.pcie_bytes_per_s > 0.0, cpu = cpu_rate > 0.0, gpu = gpu_rate > 0.0;
  d.measured = pcie && cpu && gpu;
  if (cpu) d.host_s = t * b / cpu_rate;
  if (pcie) d.copy_s = ((in_slot ? 0.0 : b) + t * c.act_bytes_per_token) / c.pcie_bytes_per_s;
  if (gpu) d.copy_s += t * b / gpu_rate;
  switch (policy) {
    case MissPolicy::miss_cpu:
      d.choice = MissChoice::miss_host;
      break;
    case MissPolicy::miss_copy:
      d.choice = MissChoice::miss_copy;
      break;
    case MissPolicy::miss_auto:
      d.choice = d.measured && t > 0.0 && d.copy_s < d.host_s ? MissChoice::miss_copy : MissChoice::miss_host;
      break;
  }
  return d;
}

std::vector<MissDecision> decide_layer_misses(MissPolicy policy, const MissCosts& c,
                                              const std::vector<MissCandidate>& misses, int n_slots) {
  std::vector<MissDecision> out;
  out.reserve(misses.size());
  for (const MissCandidate& m : misses) out.push_back(decide_miss(policy, c, m.bytes, m.tokens, m.in_slot));
  if (policy != MissPolicy::miss_auto) return out;
  std::vector<size_t> copies;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].choice == MissChoice::miss_copy) copies.push_back(i);
  if (copies.size() <= static_cast<size_t>(std::max(n_slots, 0))) return out;
  std::stable_sort(copies.begin(), copies.end(), [&](size_t a, size_t b) {
    const double sa = out[a].host_s - out[a].copy_s, sb = out[b].host_s - out[b].copy_s;
    if (sa != sb) return sa > sb;
    return misses[a].tokens > misses[b].tokens;
  });
  for (size_t j = static_cast<size_t>(std::max(n_slots, 0)); j < copies.size(); ++j)
    out[copies[j]].choice = MissChoice::miss_host;
  return out;
}

void MissRate::add(double slot_bytes, double seconds) {
  if (!(slot_bytes > 0.0) || !(seconds > 0.0)) return;
  const double r = slot_bytes / seconds;
  rate_ = n_ == 0 ? r : (1.0 - alpha_) * rate_ + alpha_ * r;
  ++n_;
}

void MissRates::add(double weight_bytes, double slot_bytes, double seconds) {
  if (!(weight_bytes > 0.0)) return;
  r_[miss_bucket(static_cast<int64_t>(slot_bytes / weight_bytes + 0.5))].add(slot_bytes, seconds);
}

MissRateTable MissRates::table() const {
  MissRateTable t;
  for (int b = 0; b < kMissBuckets; ++b) t.bytes_per_s[b] = r_[b].bytes_per_s();
  return t;
}

}  // namespace strata
