#include "bench_gpu.h"

#include <cstdio>

#include "base/units.h"

namespace strata::cli {

namespace {

nlohmann::json miss_json(const MissStats& x) {
  return nlohmann::json{
      {"host_experts", x.host_experts}, {"host_slots", x.host_slots}, {"copy_experts", x.copy_experts},
      {"copy_slots", x.copy_slots},     {"copies", x.copies},         {"prefetches", x.prefetches},
      {"slot_hits", x.slot_hits},       {"copy_bytes", x.copy_bytes}, {"copy_s", x.copy_s},
      {"est_host_s", x.est_host_s},     {"est_copy_s", x.est_copy_s}};
}

std::string miss_line(const MissStats& x) {
  char b[320];
  std::snprintf(b, sizeof b,
                "%llu on the host (%llu slots, est %.2f ms), %llu on the device from miss slots (%llu "
                "slots, %llu uploads (%llu ahead) of %s in %.2f ms queued, %llu slot hits, est %.2f ms)",
                (unsigned long long)x.host_experts, (unsigned long long)x.host_slots, x.est_host_s * 1e3,
                (unsigned long long)x.copy_experts, (unsigned long long)x.copy_slots,
                (unsigned long long)x.copies, (unsigned long long)x.prefetches,
                format_bytes(x.copy_bytes).c_str(), x.copy_s * 1e3, (unsigned long long)x.slot_hits,
                x.est_copy_s * 1e3);
  return b;
}

}  // namespace

void gpu_bench_json(const DeviceExperts* de, const Device* dev, const GpuBenchReport& r, nlohmann::json& j) {
  if (de != nullptr) {
    j["expert_gpu_resident"] = de->plan().n_placed;
    j["expert_gpu_bytes"] = de->plan().bytes;
    j["tg_experts_gpu_per_token"] = r.tg_tier.gpu_per_token();
    j["tg_experts_host_per_token"] = r.tg_tier.host_per_token();
    const MissCosts c = de->miss_costs();
    j["miss_policy"] = miss_policy_name(de->plan().miss);
    j["miss_slots"] = de->plan().miss_slots;
    // Rates by tokens per expert: [i] for 2^i .. 2^(i+1) - 1 tokens (0: not measured).
    j["miss_rates"] = {{"upload_bytes_per_s", c.pcie_bytes_per_s},
                       {"host_bytes_per_s", c.cpu.bytes_per_s},
                       {"device_bytes_per_s", c.gpu.bytes_per_s}};
    j["pp_miss"] = miss_json(r.pp_tier.miss);
    j["tg_miss"] = miss_json(r.tg_tier.miss);
    j["tg_miss_layers"] = nlohmann::json::array();
    for (const MissStats& x : r.tg_layers) j["tg_miss_layers"].push_back(miss_json(x));
  }
  if (r.copy_bytes_per_s > 0) {
    j["device_copy_gbps"] = r.copy_bytes_per_s / 1e9;
    j["tg_fraction_of_device_copy"] = r.tg_gbps * 1e9 / r.copy_bytes_per_s;
  }
  if (dev != nullptr && r.tg_tokens > 0) {
    j["device"] = dev->name();
    j["tg_device_submissions_per_token"] = static_cast<double>(r.tg_queue.submissions) / r.tg_tokens;
    j["tg_device_busy_ms_per_token"] = 1e3 * r.tg_queue.busy_s / r.tg_tokens;
    j["tg_device_busy_fraction"] = r.tg_wall_s > 0 ? r.tg_queue.busy_s / r.tg_wall_s : 0.0;
  }
}

std::string gpu_bench_text(const DeviceExperts* de, const Device* dev, const GpuBenchReport& r, bool pp,
                           bool tg, bool verbose) {
  std::string out;
  char b[512];
  if (tg) {
    if (de != nullptr) {
      std::snprintf(b, sizeof b, "tg experts per token: %.2f on %s, %.2f on the host (%s)\n",
                    r.tg_tier.gpu_per_token(), de->device().name().c_str(), r.tg_tier.host_per_token(),
                    de->plan().summary(de->device().name()).c_str());
      out += b;
    }
    if (dev != nullptr && r.copy_bytes_per_s > 0) {
      std::snprintf(
          b, sizeof b, "tg bandwidth on %s: %.1f%% of its copy bandwidth %.0f GB/s (read + write)\n",
          dev->name().c_str(), 100.0 * r.tg_gbps * 1e9 / r.copy_bytes_per_s, r.copy_bytes_per_s / 1e9);
      out += b;
    }
    if (dev != nullptr && r.tg_tokens > 0) {
      std::snprintf(
          b, sizeof b,
          "tg on %s: %.1f submissions per token, busy %.3f ms per token (%.1f%% of the tokens' time)\n",
          dev->name().c_str(), static_cast<double>(r.tg_queue.submissions) / r.tg_tokens,
          1e3 * r.tg_queue.busy_s / r.tg_tokens,
          r.tg_wall_s > 0 ? 100.0 * r.tg_queue.busy_s / r.tg_wall_s : 0.0);
      out += b;
    }
  }
  if (de == nullptr) return out;
  auto add = [&](const char* test, const MissStats& all, const std::vector<MissStats>& layers) {
    out += std::string(test) + " missed experts (" + de->miss_summary() + "): " + miss_line(all) + "\n";
    if (verbose)  // per layer
      for (size_t l = 0; l < layers.size(); ++l)
        if (layers[l].host_experts + layers[l].copy_experts > 0)
          out += "  layer " + std::to_string(l) + ": " + miss_line(layers[l]) + "\n";
  };
  if (pp) add("pp", r.pp_tier.miss, r.pp_layers);
  if (tg) add("tg", r.tg_tier.miss, r.tg_layers);
  return out;
}

}  // namespace strata::cli
