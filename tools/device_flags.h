// The device flags shared by `run`, `serve`, `bench` and `logits` (issue 16; llama.cpp's names):
//   --device, -dev NAME   where the layer ops run: none / cpu (the default: the CPU), Vulkan0, ...
//                         (the standard decoders' dense weights and KV caches go there; routed
//                         experts stay with the host's expert store)
//   --list-devices        print the devices (name, description, kind, memory) and exit
//   --gpu-budget SIZE     bytes the device may hold (K/M/G; absent: no limit): a placement that
//                         does not fit is an error naming the bytes needed and the budget
// add() registers them; apply() opens the device into LoadOptions::device (the flags own it: keep
// them alive longer than the model).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "base/status.h"
#include "kernels/device.h"
#include "model/model.h"

namespace strata::cli {

struct DeviceFlags {
  std::string device = "none", gpu_budget;

  void add(CLI::App& app);
  Status apply(LoadOptions* lo);
  // The device's line for summaries: "CPU" or "Vulkan0 (llvmpipe ..., 12.3 MiB in 40 buffers)".
  std::string describe() const;

  std::unique_ptr<Device> dev;  // null: the model's own CPU device
};

// The devices this build and machine offer, one per line (--list-devices).
std::string list_devices_text();

// The bytes `--device` would place on a GPU for the model at `path` (the architecture's own
// Architecture::place, on a device that only counts: nothing is allocated or copied); `strata
// plan --gpu-budget` adds the KV bill to it. An error for an architecture not behind the seam.
Result<uint64_t> gpu_weight_bytes(const std::string& path);

}  // namespace strata::cli
