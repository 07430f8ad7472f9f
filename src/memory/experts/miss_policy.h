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
// own expert runs, the device's from calibration and its runs of resident experts, the upload's
// from timed uploads): one copy is paid once per step, the compute per token, so a batch of many
// tokens amortises a copy and one token rarely does. A processor's rate depends on the batch (one
// token is bound by reading the weights, many by the arithmetic), so the compute rates are kept
// per bucket of tokens per expert (1, 2-3, 4-7, ..., >= 128) and read at the nearest bucket
// measured. A rate not measured yet (<= 0) chooses the host.
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

// Rates by tokens per expert: bucket b holds 2^b .. 2^(b+1) − 1 tokens (the last: 2^b and more).
constexpr int kMissBuckets = 8;
int miss_bucket(int64_t tokens);
struct MissRateTable {
  double bytes_per_s[kMissBuckets] = {};  // weight bytes · tokens / s; 0: not measured
  // The rate for `tokens`: its bucket's, else the nearest measured one (the lower on a tie); 0: none.
  double at(int64_t tokens) const;
  double best() const;                  // the highest measured (for summaries); 0: none
  static MissRateTable flat(double r);  // every bucket r
};

struct MissCosts {
  double pcie_bytes_per_s = 0.0;     // host → device uploads
  MissRateTable cpu, gpu;            // the host's / the device's expert runs
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

// A measured rate: each sample (weight bytes · tokens, seconds) moves an exponential average
// (weight `alpha` for the new sample; the first one is taken whole).
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

// A MissRate per bucket of tokens per expert (a sample's: its slot bytes over its weight bytes).
class MissRates {
 public:
  void add(double weight_bytes, double slot_bytes, double seconds);
  MissRateTable table() const;

 private:
  MissRate r_[kMissBuckets];
};

}  // namespace strata
