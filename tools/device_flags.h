// The device flags shared by `run`, `serve`, `bench` and `logits` (issue 16; llama.cpp's names):
//   --device, -dev NAME   where the layer ops run: none / cpu (the default: the CPU), Vulkan0, ...
//                         (the standard decoders' dense weights, KV caches and routed experts go
//                         there, as llama.cpp's -ngl 99 does)
//   --list-devices        print the devices (name, description, kind, memory) and exit
//   --gpu-budget SIZE     bytes the device may hold (K/M/G; absent: no limit): dense weights and KV
//                         that do not fit are an error naming the bytes needed and the budget; the
//                         routed experts fill what is left, hottest first (--expert-profile's counts;
//                         the rest run on the host)
//   --miss-policy P       a routed expert not in VRAM: cpu (computed on the host), copy (uploaded
//                         into a miss slot and run on the device), auto (the default: per layer and
//                         expert from the measured upload / host / device rates and the tokens
//                         routed to it; memory/experts/miss_policy.h)
//   --n-cpu-moe N         the routed experts of the first N layers stay on the host (llama.cpp's)
//   -ot, --override-tensor REGEX=BUFTYPE[,...]   llama.cpp's: routed-expert tensors whose name the
//                         regex matches stay on the host (CPU) or go to the device (its name);
//                         first match wins; other tensors follow --device
// add() registers them; apply() opens the device into LoadOptions::device (the flags own it: keep
// them alive longer than the model); place_experts() puts the routed experts on it after load
// (memory/experts/device_experts.h).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/device.h"
#include "memory/experts/device_experts.h"
#include "model/model.h"

namespace strata::cli {

struct DeviceFlags {
  std::string device = "none", gpu_budget, miss_policy = "auto";
  int n_cpu_moe = 0;
  std::vector<std::string> overrides;  // -ot values

  void add(CLI::App& app);
  // --n-cpu-moe, -ot and --miss-policy only (`strata plan`, which has its own --gpu-budget).
  void add_expert_flags(CLI::App& app);
  Status apply(LoadOptions* lo);
  // After Model::load: the routed experts onto the GPU device (none on the CPU). reserve_bytes:
  // what the sessions' KV will take of --gpu-budget (the architecture's own KvSpec bytes); the
  // experts get what the budget has left after the dense weights and that. profile: the
  // --expert-profile CSV ranking them (absent or missing file: no counts).
  Status place_experts(Model& m, uint64_t reserve_bytes, const std::string& profile) const;
  // The placement's options for model m with `used` bytes of the device taken (the dense weights):
  // the rules, the budget left and the counts.
  Result<DeviceExpertOptions> expert_options(const Model& m, uint64_t used, uint64_t reserve_bytes,
                                             const std::string& profile) const;
  // The device's line for summaries: "CPU" or "Vulkan0 (12.3 MiB in 40 buffers)", and with m
  // the routed experts placed on it ("; experts: 96 of 128 experts (9.4 MiB) on Vulkan0").
  std::string describe(const Model* m = nullptr) const;

  std::unique_ptr<Device> dev;  // null: the model's own CPU device
};

// df.place_experts with the KV of n_sessions sessions made with so reserved (Model::session_kv_bytes).
Status place_experts(const DeviceFlags& df, Model& m, const SessionOptions& so, int n_sessions,
                     const std::string& profile);

// The devices this build and machine offer, one per line (--list-devices).
std::string list_devices_text();

// What `--device` would place on a GPU for the model at `path` (the architecture's own
// Architecture::place and Model::place_experts, on a device that only counts: nothing is
// allocated or copied) under `flags` (its --gpu-budget, --n-cpu-moe, -ot), the KV taking
// kv_bytes; `strata plan --gpu-budget`'s device line. An error for an architecture not behind the
// seam.
struct GpuPlacement {
  uint64_t dense = 0, experts = 0;
  std::string experts_summary;  // DeviceExpertPlan::summary; empty: no routed experts
};
Result<GpuPlacement> gpu_placement(const std::string& path, const DeviceFlags& flags, uint64_t kv_bytes,
                                   const std::string& profile);

}  // namespace strata::cli
