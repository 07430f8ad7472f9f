// Routed experts in a GPU's memory (issue 16): the GPU tier of the expert store. At placement a
// set of (layer, expert) pairs is copied into the device's buffers (one buffer per layer, each
// expert's gate | up | down at 256-byte aligned offsets); the rest stay on the host, in the
// mmapped file or behind the host's expert store (a stats-only store: its statistics, traces and
// profile keep counting every routed expert). acquire() names the device for a placed expert (the
// MoE loop hands the layer's placed experts to it as one DeviceExpertWork per step while the host
// computes the others, kernels/device.h), and the host's views for the others.
//
// Which experts (choose_device_experts, a pure function):
//   - rules, first match wins per tensor, llama.cpp's -ot / --override-tensor REGEX=BUFTYPE: a
//     regex searched in a routed-expert tensor's name ("blk.7.ffn_up_exps.weight") and whether it
//     keeps the tensor on the host ("CPU") or on the device; --n-cpu-moe N adds, after them, a rule
//     per layer < N keeping its experts on the host. An expert runs whole on one device, so a layer
//     one of whose three tensors a rule keeps on the host keeps all its experts there;
//   - a byte budget (--gpu-budget less the dense weights and KV; none: every eligible expert):
//     the hottest eligible experts by activation counts (--expert-profile), ties (and no profile)
//     to the later layers first, then to the lower expert ids, each while it fits.
// The bytes are what placement allocates (device_expert_bytes), so `strata plan` asks the same code.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "kernels/device.h"
#include "memory/experts/expert_source.h"

namespace strata {

struct DeviceExpertRule {
  std::string pattern;  // ECMAScript regex, searched in the tensor's name
  bool on_host = true;  // "CPU"; false: the device
};

struct DeviceExpertOptions {
  std::vector<DeviceExpertRule> rules = {};  // -ot, in the order given
  int n_cpu_moe = 0;                         // the first N layers' experts stay on the host
  bool budgeted = false;                     // budget_bytes applies
  uint64_t budget_bytes = 0;                 // bytes of experts the device may hold
  std::vector<uint64_t> counts = {};         // [n_layer][n_expert] activation counts (empty: none)
};

// What placement puts where: placed[l·n_expert + e], the bytes it allocates, per-layer counts.
struct DeviceExpertPlan {
  int n_layer = 0, n_expert = 0;
  std::vector<uint8_t> placed;
  std::vector<uint64_t> expert_bytes;  // [n_layer] one expert's allocation (0: no routed experts)
  uint64_t bytes = 0;                  // total allocation
  int n_placed = 0, n_total = 0;       // experts placed / routed experts of the model
  bool on_device(int layer, int e) const { return placed[static_cast<size_t>(layer) * n_expert + e] != 0; }
  // "120 of 512 experts (46.9 MiB) on Vulkan0; layers 0-3 on the host"
  std::string summary(const std::string& device) const;
};

// One expert's bytes on a device: gate, up, down slices each at a 256-byte aligned offset.
uint64_t device_expert_bytes(const GgufFile& f, int layer);

// The plan for f's routed experts (n_layer layers of n_expert). Errors: a rule that is not a
// regex (names it), counts of the wrong size.
Result<DeviceExpertPlan> choose_device_experts(const GgufFile& f, int n_layer, int n_expert,
                                               const DeviceExpertOptions& o);

// Per-tier counters: routed (token, expert) slots run on the device / on the host, and tokens.
struct DeviceExpertTotals {
  uint64_t tokens = 0, gpu_slots = 0, host_slots = 0;
  double gpu_per_token() const { return tokens ? double(gpu_slots) / double(tokens) : 0.0; }
  double host_per_token() const { return tokens ? double(host_slots) / double(tokens) : 0.0; }
};

class DeviceExperts final : public ExpertSource {
 public:
  // Copies plan's experts into dev's buffers (errors: an allocation over the device's budget, an
  // upload; what was allocated is freed). host: the host's expert store (a stats-only one), or
  // null: the mmapped tensors. f, dev and host outlive this.
  static Result<std::unique_ptr<DeviceExperts>> open(const GgufFile& f, Device& dev, DeviceExpertPlan plan,
                                                     ExpertSource* host);
  ~DeviceExperts() override;

  void begin_step(int64_t n_tokens) override;
  void end_step() override;
  void on_route(int layer, const float* x, int64_t n, const int32_t* sel, const float* wts, int k) override;
  Result<ExpertViews> acquire(int layer, int expert) override;
  bool ready(int layer, int expert) const override;
  int wait_any(int layer, const int32_t* experts, int n) override;
  void release(int layer, int expert) override;

  const DeviceExpertPlan& plan() const { return plan_; }
  const Device& device() const { return dev_; }
  DeviceExpertTotals totals() const;  // any thread

 private:
  DeviceExperts(const GgufFile& f, Device& dev, DeviceExpertPlan plan, ExpertSource* host)
      : f_(f), dev_(dev), plan_(std::move(plan)), host_(host) {}
  struct Layer {
    const TensorView* parts[3] = {};  // the 3-D expert tensors (null: no routed experts)
    DeviceBuffer buf;
    std::vector<DeviceExpert> mats;  // [n_expert], for placed experts
  };
  const GgufFile& f_;
  Device& dev_;
  DeviceExpertPlan plan_;
  ExpertSource* host_;
  std::vector<Layer> layers_;
  std::atomic<uint64_t> tokens_{0}, gpu_slots_{0}, host_slots_{0};
};

}  // namespace strata
