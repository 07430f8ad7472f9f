#include "device_flags.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/units.h"
#include "memory/experts/expert_stats.h"
#include "model/hparams.h"
#if STRATA_HAVE_VULKAN
#include "kernels/vulkan/vk_device.h"
#endif

namespace strata::cli {

namespace {

bool is_cpu_name(const std::string& s) {
  return s.empty() || s == "none" || s == "cpu" || s == "CPU";
}

// The names --device takes here, for error messages: "none, cpu, Vulkan0 (llvmpipe ...)".
std::string available_names() {
  std::string out = "none, cpu";
#if STRATA_HAVE_VULKAN
  auto list = list_vulkan_devices();
  if (list.ok())
    for (const VulkanDeviceInfo& d : *list) out += ", " + d.name + " (" + d.description + ")";
  else
    out += " (Vulkan: " + list.message() + ")";
#else
  out += " (this strata was built without the Vulkan device: STRATA_VULKAN, libvulkan-dev and glslc)";
#endif
  return out;
}

// A GPU that holds nothing: it counts what is placed on it (gpu_weight_bytes).
class MeterDevice final : public Device {
 public:
  const std::string& name() const override { return name_; }
  DeviceKind kind() const override { return DeviceKind::device_gpu; }
  DeviceMemory memory() const override { return mem_; }
  Result<DeviceBuffer> alloc(size_t bytes, std::string_view) override {
    mem_.allocated += bytes;
    mem_.peak = std::max(mem_.peak, mem_.allocated);
    ++mem_.buffers;
    return DeviceBuffer{next_id_++, bytes, nullptr};
  }
  Result<DeviceBuffer> import(const void*, size_t bytes, std::string_view what) override {
    return alloc(bytes, what);
  }
  void free(DeviceBuffer& b) override {
    if (b.id == 0) return;
    mem_.allocated -= b.bytes;
    --mem_.buffers;
    b = DeviceBuffer{};
  }
  // Uploads land nowhere (the experts' copies at placement).
  Result<DeviceTicket> upload(const DeviceBuffer&, size_t, const void*, size_t) override {
    return DeviceTicket{0};
  }
  Result<DeviceTicket> download(void*, const DeviceBuffer&, size_t, size_t) override { return none(); }
  Result<DeviceTicket> run_experts(const DeviceExpertWork&) override { return none(); }
  Result<DeviceTicket> run_attention(const DeviceAttnWork&) override { return none(); }
  Result<DeviceTicket> run_sparse_attention(const DeviceSparseAttnWork&) override { return none(); }
  Result<DeviceTicket> run_ffn(const DeviceFfnWork&) override { return none(); }
  Result<DeviceTicket> run_linear(const DeviceLinearWork&) override { return none(); }
  bool reached(DeviceTicket) const override { return true; }
  Status wait(DeviceTicket) override { return {}; }

 private:
  static Result<DeviceTicket> none() { return err("the plan's meter device runs nothing"); }
  std::string name_ = "GPU";
  DeviceMemory mem_;
  uint64_t next_id_ = 1;
};

}  // namespace

Result<GpuPlacement> gpu_placement(const std::string& path, const DeviceFlags& flags, uint64_t kv_bytes,
                                   const std::string& profile) {
  MeterDevice meter;
  LoadOptions lo;
  lo.n_threads = 1;
  lo.device = &meter;
  STRATA_ASSIGN(auto model, Model::load(path, lo));
  GpuPlacement p;
  p.dense = meter.memory().allocated;
  if (model->hparams().n_expert == 0 || !model->has_gguf()) return p;
  STRATA_ASSIGN(DeviceExpertOptions o, flags.expert_options(*model, p.dense, kv_bytes, profile));
  STRATA_TRY(model->place_experts(o));
  p.experts = meter.memory().allocated - p.dense;
  if (const DeviceExperts* de = model->device_experts()) p.experts_summary = de->plan().summary("the GPU");
  return p;
}

std::string list_devices_text() {
  std::string out = "Available devices:\n";
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  out += "  CPU: host (" + std::to_string(std::thread::hardware_concurrency()) + " threads, " +
         format_bytes(pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0) + " RAM) [cpu]\n";
#if STRATA_HAVE_VULKAN
  auto list = list_vulkan_devices();
  if (!list.ok()) {
    out += "  (no Vulkan: " + list.message() + ")\n";
  } else {
    if (list->empty()) out += "  (no Vulkan device)\n";
    for (const VulkanDeviceInfo& d : *list)
      out +=
          "  " + d.name + ": " + d.description + " (" + format_bytes(d.memory_bytes) + ") [" + d.type + "]\n";
  }
#else
  out += "  (built without the Vulkan device: STRATA_VULKAN, libvulkan-dev and glslc)\n";
#endif
  return out;
}

void DeviceFlags::add_expert_flags(CLI::App& app) {
  app.add_option("--n-cpu-moe", n_cpu_moe, "keep the routed experts of the first N layers on the host");
  app.add_option("--miss-policy", miss_policy,
                 "a routed expert not in VRAM: auto (per layer and expert from measured costs), cpu (on the "
                 "host), copy (uploaded into a miss slot, run on the device)")
      ->capture_default_str();
  app.add_option(
      "--override-tensor", overrides,
      "(-ot) REGEX=BUFTYPE[,...]: routed-expert tensors matching REGEX stay on the host (CPU) or go to "
      "the device (its name); first match wins");
}

void DeviceFlags::add(CLI::App& app) {
  app.add_option("--device", device,
                 "where the layer ops run: none/cpu (the CPU), Vulkan0, ... (dense weights, KV and routed "
                 "experts on it; see --n-cpu-moe, -ot, --gpu-budget)")
      ->capture_default_str();
  add_expert_flags(app);
  app.add_flag_callback(
         "--list-devices",
         [] {
           std::fputs(list_devices_text().c_str(), stdout);
           throw CLI::Success();
         },
         "print the available devices and exit")
      ->trigger_on_parse();
  app.add_option("--gpu-budget", gpu_budget,
                 "bytes the device may hold (K/M/G; absent: no limit): dense weights and KV must fit, "
                 "routed experts fill the rest, hottest first (--expert-profile)");
}

Status DeviceFlags::apply(LoadOptions* lo) {
  uint64_t budget = 0;
  if (!gpu_budget.empty()) {
    auto b = parse_size(gpu_budget);
    if (!b.ok()) return err("--gpu-budget: %s", b.message().c_str());
    if (*b == 0) return err("--gpu-budget must be > 0 (omit it for no limit)");
    budget = *b;
  }
  if (n_cpu_moe < 0) return err("--n-cpu-moe %d must be >= 0", n_cpu_moe);
  STRATA_ASSIGN(const MissPolicy miss, parse_miss_policy(miss_policy));
  if (is_cpu_name(device)) {
    if (budget > 0) return err("--gpu-budget needs a GPU device (--device Vulkan0, ...)");
    if (miss == MissPolicy::miss_copy)
      return err(
          "--miss-policy copy needs a GPU device (--device Vulkan0, ...): without one every expert runs "
          "on the host");
    if (n_cpu_moe > 0 || !overrides.empty())
      return err("--n-cpu-moe and -ot place routed experts on a GPU device: give --device Vulkan0, ...");
    lo->device = nullptr;
    return {};
  }
#if STRATA_HAVE_VULKAN
  if (device.rfind("Vulkan", 0) == 0) {
    auto d = VulkanDevice::open(device, budget);
    if (!d.ok()) return err("--device %s: %s", device.c_str(), d.message().c_str());
    dev = std::move(d).value();
    lo->device = dev.get();
    return {};
  }
#endif
  return err("--device %s: no such device; available: %s", device.c_str(), available_names().c_str());
}

Result<DeviceExpertOptions> DeviceFlags::expert_options(const Model& m, uint64_t used, uint64_t reserve_bytes,
                                                        const std::string& profile) const {
  DeviceExpertOptions o;
  o.n_cpu_moe = n_cpu_moe;
  STRATA_ASSIGN(o.miss, parse_miss_policy(miss_policy));
  o.miss_slots = default_miss_slots(o.miss, m.hparams().n_expert_used);
  for (const std::string& value : overrides) {
    size_t a = 0;
    while (a <= value.size()) {  // comma-separated REGEX=BUFTYPE pairs, as llama.cpp splits them
      size_t b = value.find(',', a);
      if (b == std::string::npos) b = value.size();
      const std::string item = value.substr(a, b - a);
      a = b + 1;
      const size_t eq = item.rfind('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
        return err("-ot '%s': expected REGEX=BUFTYPE (e.g. exps=CPU)", item.c_str());
      const std::string buft = item.substr(eq + 1);
      const bool host = buft == "CPU" || buft == "cpu";
      if (!host && buft != device)
        return err("-ot '%s': buffer type %s is neither CPU nor the device (%s)", item.c_str(), buft.c_str(),
                   device.c_str());
      o.rules.push_back(DeviceExpertRule{item.substr(0, eq), host});
    }
  }
  if (!gpu_budget.empty()) {
    STRATA_ASSIGN(const uint64_t budget, parse_size(gpu_budget));
    o.budgeted = true;
    o.budget_bytes = budget > used + reserve_bytes ? budget - used - reserve_bytes : 0;
  }
  const HParams& hp = m.hparams();
  if (!profile.empty() && std::filesystem::exists(profile)) {
    o.counts.assign(static_cast<size_t>(hp.n_layer) * static_cast<size_t>(hp.n_expert), 0);
    STRATA_TRY(expert_profile_load(profile, hp.n_layer, hp.n_expert, &o.counts).status());
  }
  return o;
}

Status DeviceFlags::place_experts(Model& m, uint64_t reserve_bytes, const std::string& profile) const {
  if (!dev || m.hparams().n_expert == 0) return {};
  STRATA_ASSIGN(DeviceExpertOptions o, expert_options(m, dev->memory().allocated, reserve_bytes, profile));
  return m.place_experts(o);
}

Status place_experts(const DeviceFlags& df, Model& m, const SessionOptions& so, int n_sessions,
                     const std::string& profile) {
  if (!df.dev || m.hparams().n_expert == 0) return {};
  STRATA_ASSIGN(const uint64_t kv, m.session_kv_bytes(so));
  return df.place_experts(m, kv * static_cast<uint64_t>(std::max(n_sessions, 1)), profile);
}

std::string DeviceFlags::describe(const Model* model) const {
  if (!dev) return "CPU";
  const DeviceMemory m = dev->memory();
  std::string s =
      dev->name() + " (" + format_bytes(m.allocated) + " in " + std::to_string(m.buffers) + " buffers";
  if (m.budget > 0) s += " of a " + format_bytes(m.budget) + " budget";
  s += ")";
  if (model && model->device_experts())
    s += "; experts: " + model->device_experts()->plan().summary(dev->name());
  return s;
}

}  // namespace strata::cli
