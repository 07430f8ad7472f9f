// strata bench's GPU lines (pp / tg with --device): the routed experts per tier and what the miss
// policy chose and cost (memory/experts/device_experts.h, miss_policy.h), per test and per layer,
// and the device's queue over the timed tg repetitions (submissions and busy time per token against
// the tokens' wall time, and the tg weight traffic as a fraction of the device's copy bandwidth).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "memory/experts/device_experts.h"

namespace strata::cli {

struct GpuBenchReport {
  DeviceExpertTotals pp_tier, tg_tier;          // over the timed pp / tg repetitions
  std::vector<MissStats> pp_layers, tg_layers;  // the miss policy per layer over them
  DeviceTiming tg_queue;                        // the device's queue over the timed tg repetitions
  double tg_tokens = 0, tg_wall_s = 0, tg_gbps = 0;
  double copy_bytes_per_s = 0;  // Device::copy_bandwidth (0: not measured)
};

// Adds the report's keys to bench's JSON (none for what is absent: no device, no GPU experts).
void gpu_bench_json(const DeviceExperts* de, const Device* dev, const GpuBenchReport& r, nlohmann::json& j);
// The text lines: experts per tier, the device's bandwidth and queue (tg), and the missed
// experts per test (per layer with verbose).
std::string gpu_bench_text(const DeviceExperts* de, const Device* dev, const GpuBenchReport& r, bool pp,
                           bool tg, bool verbose);

}  // namespace strata::cli
