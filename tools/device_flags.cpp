#include "device_flags.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "base/units.h"
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
  Result<DeviceTicket> upload(const DeviceBuffer&, size_t, const void*, size_t) override { return none(); }
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

Result<uint64_t> gpu_weight_bytes(const std::string& path) {
  MeterDevice meter;
  LoadOptions lo;
  lo.n_threads = 1;
  lo.device = &meter;
  STRATA_ASSIGN(auto model, Model::load(path, lo));
  return meter.memory().allocated;
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

void DeviceFlags::add(CLI::App& app) {
  app.add_option("--device", device,
                 "where the layer ops run: none/cpu (the CPU), Vulkan0, ... (dense weights and KV on it; "
                 "routed experts stay on the host)")
      ->capture_default_str();
  app.add_flag_callback(
         "--list-devices",
         [] {
           std::fputs(list_devices_text().c_str(), stdout);
           throw CLI::Success();
         },
         "print the available devices and exit")
      ->trigger_on_parse();
  app.add_option("--gpu-budget", gpu_budget,
                 "bytes the device may hold (K/M/G; absent: no limit); a placement that does not fit is "
                 "an error");
}

Status DeviceFlags::apply(LoadOptions* lo) {
  uint64_t budget = 0;
  if (!gpu_budget.empty()) {
    auto b = parse_size(gpu_budget);
    if (!b.ok()) return err("--gpu-budget: %s", b.message().c_str());
    if (*b == 0) return err("--gpu-budget must be > 0 (omit it for no limit)");
    budget = *b;
  }
  if (is_cpu_name(device)) {
    if (budget > 0) return err("--gpu-budget needs a GPU device (--device Vulkan0, ...)");
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

std::string DeviceFlags::describe() const {
  if (!dev) return "CPU";
  const DeviceMemory m = dev->memory();
  std::string s =
      dev->name() + " (" + format_bytes(m.allocated) + " in " + std::to_string(m.buffers) + " buffers";
  if (m.budget > 0) s += " of a " + format_bytes(m.budget) + " budget";
  return s + ")";
}

}  // namespace strata::cli
