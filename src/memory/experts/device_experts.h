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
//
// Misses (--miss-policy, memory/experts/miss_policy.h): an expert not placed is computed on the
// host (cpu), or uploaded into one of the device's miss slots and run there with the layer's
// placed experts (copy), or either, per layer and per expert from measured costs (auto). The
// slots (miss_slots of them, each the largest layer's expert) are reserved out of the budget
// before the hot set, only when some expert misses; they are kept least-recently-used across
// layers, so an expert still in a slot is run again without an upload. on_route() decides the
// layer's misses (the tokens routed to each expert are known there) and pins their slots;
// acquire() queues an expert's upload on the device's in-order queue (the device copies it while
// the host queues the next one and computes its own experts; the layer's expert run is queued
// after the uploads); release() unpins. Under copy a layer with more misses than slots runs them
// in turns (ready() false until wait_any() hands out a freed slot); on a decode step it also
// uploads the next layer's missed experts that the router look-ahead predicts (memory/experts/
// prefetch.h) into the slots the layer left free, so their copies overlap this layer's compute
// (the slots are 2 · top-k: one layer's misses and the next one's). Rates: the upload's and the
// device's from timed calibration runs at open (auto), then the device's from its runs of placed
// experts and the host's from its own expert runs (on_computed).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "kernels/device.h"
#include "memory/experts/expert_source.h"
#include "memory/experts/miss_policy.h"
#include "memory/experts/prefetch.h"

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
  MissPolicy miss = MissPolicy::miss_cpu;    // experts not placed
  int miss_slots = 0;  // miss slots wanted (default_miss_slots); reserved only when some expert misses
};

// The miss slots a policy wants: none for cpu, else 2 · top-k (one layer's misses of a decode
// step, and as many kept for the next steps' hits and a prompt's busiest experts).
int default_miss_slots(MissPolicy p, int n_expert_used);

// What placement puts where: placed[l·n_expert + e], the bytes it allocates, per-layer counts.
struct DeviceExpertPlan {
  int n_layer = 0, n_expert = 0;
  std::vector<uint8_t> placed;
  std::vector<uint64_t> expert_bytes;  // [n_layer] one expert's allocation (0: no routed experts)
  uint64_t bytes = 0;                  // total allocation
  int n_placed = 0, n_total = 0;       // experts placed / routed experts of the model
  MissPolicy miss = MissPolicy::miss_cpu;
  int miss_slots = 0;            // miss slots allocated
  uint64_t miss_slot_bytes = 0;  // each (the largest layer's expert_bytes)
  uint64_t slots_bytes() const { return static_cast<uint64_t>(miss_slots) * miss_slot_bytes; }
  bool on_device(int layer, int e) const { return placed[static_cast<size_t>(layer) * n_expert + e] != 0; }
  // "120 of 512 experts (46.9 MiB) on Vulkan0; layers 0-3 on the host"
  std::string summary(const std::string& device) const;
};

// One expert's bytes on a device: gate, up, down slices each at a 256-byte aligned offset.
uint64_t device_expert_bytes(const GgufFile& f, int layer);

// The plan for f's routed experts (n_layer layers of n_expert). Errors: a rule that is not a
// regex (names it), counts of the wrong size, --miss-policy copy with misses and no room in the
// budget for one miss slot.
Result<DeviceExpertPlan> choose_device_experts(const GgufFile& f, int n_layer, int n_expert,
                                               const DeviceExpertOptions& o);

// What the miss policy did (per layer, or summed): missed experts computed on the host and their
// routed (token, expert) slots; missed experts run from a miss slot, their slots, uploads (a
// slot hit needs none), the bytes uploaded and the host's time queuing them (the staging copies;
// the device's copy runs behind), and the estimated seconds of the choices made.
struct MissStats {
  uint64_t host_experts = 0, host_slots = 0;
  uint64_t copy_experts = 0, copy_slots = 0, copies = 0, slot_hits = 0, copy_bytes = 0;
  uint64_t prefetches = 0;  // of the copies, those made ahead (look-ahead; a hit when predicted right)
  double copy_s = 0.0, est_host_s = 0.0, est_copy_s = 0.0;
  MissStats& operator+=(const MissStats& o);
  MissStats operator-(const MissStats& o) const;
};

// Per-tier counters: routed (token, expert) slots run on the device (placed or copied) / on the
// host, and tokens; miss: the miss policy's counts summed over the layers.
struct DeviceExpertTotals {
  uint64_t tokens = 0, gpu_slots = 0, host_slots = 0;
  MissStats miss = {};
  double gpu_per_token() const { return tokens ? double(gpu_slots) / double(tokens) : 0.0; }
  double host_per_token() const { return tokens ? double(host_slots) / double(tokens) : 0.0; }
  DeviceExpertTotals since(const DeviceExpertTotals& before) const;
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
  void on_computed(int layer, const ExpertRunTimes& t) override;

  const DeviceExpertPlan& plan() const { return plan_; }
  const Device& device() const { return dev_; }
  DeviceExpertTotals totals() const;           // any thread
  std::vector<MissStats> miss_layers() const;  // [n_layer], any thread
  MissCosts miss_costs() const;                // the rates measured so far, any thread
  // "auto: upload 8.10 GB/s, host 1:20.31 2:25.02 GB/s, device 1:5.20 32:60.11 GB/s" (rates as
  // measured, by tokens per expert; "-": none yet).
  std::string miss_summary() const;

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
  struct Slot {
    int layer = -1, expert = -1;  // what it holds (-1: nothing)
    uint64_t used = 0;            // the clock at its last use (least recently used goes first)
    bool pinned = false;          // the current layer's
    DeviceExpert mats;
  };
  // Miss slots and rates (miss_policy.h).
  void calibrate();
  int take_slot(int expert);  // the least recently used unpinned slot, pinned for the expert; -1: none
  void prefetch_next(int layer, const float* x);  // copy, decode: layer + 1's predicted misses
  void count_upload(int layer, double seconds, bool ahead);
  Result<DeviceTicket> upload_to(Slot& s, int layer, int expert);  // queues it; the last upload's ticket
  DeviceBuffer slot_buf_;
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
  // The layer on_route() decided last: per expert 0 (host, placed or not routed), 1 (copy, slot_of_
  // holds its slot), 2 (copy, waiting for a slot); uploads queued since.
  int cur_layer_ = -1;
  std::vector<int8_t> want_;
  std::vector<int> slot_of_;
  int layer_uploads_ = 0;
  std::unique_ptr<RouterLookahead> lookahead_;  // copy only
  std::vector<uint8_t> mark_;
  MissRate pcie_;
  MissRates cpu_, gpu_;
  double act_bytes_per_token_ = 0.0;
  mutable std::mutex mu_;  // the rates and miss_ (read by other threads)
  std::vector<MissStats> miss_;
  std::vector<Layer> layers_;
  std::atomic<uint64_t> tokens_{0}, gpu_slots_{0}, host_slots_{0};
};

}  // namespace strata
