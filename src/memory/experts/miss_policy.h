// The miss policy of the GPU tier (issue 16): a routed expert that is not resident in VRAM
// (memory/experts/device_experts.h) is either computed on the host where it sits (cpu) or copied
// into one of the device's miss slots and run there with the layer's resident experts (copy);
// auto chooses per layer and per expert from measured costs. Pure functions of injected numbers:
//
//   host cost  = tokens · bytes / cpu_bytes_per_s
//   copy cost  = (in a slot already ? 0 : bytes / pcie_bytes_per_s)      the expert's upload
//              + tokens · act_bytes_per_token / pcie_bytes_per_s         activations down, rows up
//              + tokens · bytes / gpu_bytes_per_s                        the device's run
//
// Rates are bytes of expert weights per routed token per second, as measured (the host's from its
// own expert runs, the device's from its runs of resident experts, the upload's from timed
// uploads): one copy is paid once per step, the compute per token, so a batch of many tokens
// amortises a copy and one token rarely does. A rate not measured yet (<= 0) chooses the host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace strata {

enum class MissPolicy { miss_auto, miss_cpu, miss_copy };

// "auto", "cpu", "copy".
const char* miss_policy_name(MissPolicy p);
// The --miss-policy value; an error names the flag and the allowed values.
Result<MissPolicy> parse_miss_policy(const std::string& s);

struct MissCosts {
  double pcie_bytes_per_s = 0.0;     // host → device uploads
  double cpu_bytes_per_s = 0.0;      // the host's expert runs (weight bytes · tokens / s)
  double gpu_bytes_per_s = 0.0;      // the device's expert runs (weight bytes · tokens / s)
  double act_bytes_per_token = 0.0;  // activation bytes a routed token moves over the bus (x down, y up)
};

enum class MissChoice { miss_host, miss_copy };

struct MissDecision {
  MissChoice choice = MissChoice::miss_host;
  double host_s = 0.0;    // estimated seconds on the host
  double copy_s = 0.0;    // estimated seconds to copy (unless in a slot) and run on the device
  bool measured = false;  // every rate the estimates use is known
};

// One missed expert of `bytes` with `tokens` routed to it this step; in_slot: its bytes are in a
// miss slot already (no upload).
MissDecision decide_miss(MissPolicy policy, const MissCosts& c, uint64_t bytes, int64_t tokens, bool in_slot);

// A layer's missed experts: decide_miss for each, then at most n_slots copies, the largest saving
// (host_s − copy_s) first (ties: more tokens, then the lower index); copies over that run on the
// host under auto. Under copy every one is copied (the caller runs them n_slots at a time).
struct MissCandidate {
  uint64_t bytes = 0;
  int64_t tokens = 0;
  bool in_slot = false;
};
std::vector<MissDecision> decide_layer_misses(MissPolicy policy, const MissCosts& c,
                                              const std::vector<MissCandidate>& misses, int n_slots);

// The measured rates behind MissCosts: each sample (bytes · tokens, seconds) moves an exponential
// average (weight `alpha` for the new sample; the first one is taken whole).
class MissRate {
 public:
  explicit MissRate(double alpha = 0.25) : alpha_(alpha) {}
  void add(double slot_bytes, double seconds);
  double bytes_per_s() const { return rate_; }  // 0: none yet
  uint64_t samples() const { return n_; }

 private:
  double alpha_;
  double rate_ = 0.0;
  uint64_t n_ = 0;
};

}  // namespace strata
