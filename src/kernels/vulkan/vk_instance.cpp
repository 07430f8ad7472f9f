#include "kernels/vulkan/vk_instance.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstring>

namespace strata::vk {

namespace {

// The loader unloads a driver (ICD) when its last instance goes; a driver's process-wide state
// (allocated from its own globals) then points nowhere, and LeakSanitizer counts it as leaked
// from an unknown module. Pinning every loaded Vulkan driver library (RTLD_NODELETE) keeps it
// mapped until exit, as one instance for the process lifetime would: later instances also skip
// reloading it.
void pin_loaded_drivers() {
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) -> int {
        const char* path = info->dlpi_name;
        if (path == nullptr || *path == '\0') return 0;
        const char* base = std::strrchr(path, '/');
        base = base ? base + 1 : path;
        if (std::strncmp(base, "libvulkan_", 10) == 0 || std::strstr(base, "_icd") != nullptr) {
          // RTLD_NOLOAD: only the already-mapped object; the extra reference is never dropped.
          (void)dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        }
        return 0;
      },
      nullptr);
}

}  // namespace

const char* device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

namespace {

int preference(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_OTHER:
      return 3;
    default:
      return 4;  // CPU
  }
}

}  // namespace

Result<std::unique_ptr<Instance>> Instance::create() {
  STRATA_ASSIGN(Api api, load_global());
  uint32_t version = VK_API_VERSION_1_0;
  if (api.vkEnumerateInstanceVersion != nullptr) api.vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_1)
    return err("Vulkan: the loader offers Vulkan %u.%u; strata needs 1.1 or later",
               VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "strata";
  app.pEngineName = "strata";
  app.apiVersion = version >= VK_API_VERSION_1_2 ? VK_API_VERSION_1_2 : VK_API_VERSION_1_1;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  std::unique_ptr<Instance> inst(new Instance());
  if (VkResult r = api.vkCreateInstance(&ci, nullptr, &inst->instance_); r != VK_SUCCESS) {
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
      return err(
          "Vulkan: no driver (ICD) is installed: a GPU's, or Debian's mesa-vulkan-drivers for lavapipe "
          "on the CPU (%s)",
          result_name(r));
    return err("Vulkan: creating an instance failed: %s", result_name(r));
  }
  pin_loaded_drivers();
  inst->api_ = api;
  STRATA_TRY(load_instance(inst->api_, inst->instance_));
  const Api& a = inst->api_;

  uint32_t n = 0;
  a.vkEnumeratePhysicalDevices(inst->instance_, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  if (n > 0) a.vkEnumeratePhysicalDevices(inst->instance_, &n, pds.data());
  for (VkPhysicalDevice pd : pds) {
    VkPhysicalDeviceProperties props;
    a.vkGetPhysicalDeviceProperties(pd, &props);
    if (props.apiVersion < VK_API_VERSION_1_1) continue;
    uint32_t nq = 0;
    a.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qs(nq);
    a.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qs.data());
    uint32_t family = nq;
    for (uint32_t i = 0; i < nq && family == nq; ++i)
      if (qs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
    if (family == nq) continue;
    PhysicalDevice d;
    d.handle = pd;
    d.description = props.deviceName;
    d.type = props.deviceType;
    d.api_version = props.apiVersion;
    d.queue_family = family;
    d.max_storage_range = props.limits.maxStorageBufferRange;
    d.vendor_id = props.vendorID;
    d.device_id = props.deviceID;
    std::memcpy(d.cache_uuid, props.pipelineCacheUUID, VK_UUID_SIZE);
    d.timestamp_bits = qs[family].timestampValidBits;
    VkPhysicalDeviceSubgroupProperties sg{};
    sg.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &sg;
    a.vkGetPhysicalDeviceProperties2(pd, &p2);
    if ((sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
        (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0 &&
        (sg.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) != 0)
      d.subgroup_size = sg.subgroupSize;
    d.timestamp_period = props.limits.timestampPeriod;
    VkPhysicalDeviceMemoryProperties mem;
    a.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
      if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
        d.local_bytes = std::max<uint64_t>(d.local_bytes, mem.memoryHeaps[h].size);
    VkPhysicalDeviceTimelineSemaphoreFeatures tl{};
    tl.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = props.apiVersion >= VK_API_VERSION_1_2 ? &tl : nullptr;
    a.vkGetPhysicalDeviceFeatures2(pd, &f2);
    d.timeline = props.apiVersion >= VK_API_VERSION_1_2 && app.apiVersion >= VK_API_VERSION_1_2 &&
                 tl.timelineSemaphore == VK_TRUE && a.vkGetSemaphoreCounterValue != nullptr &&
                 a.vkWaitSemaphores != nullptr;
    inst->devices_.push_back(std::move(d));
  }
  std::stable_sort(inst->devices_.begin(), inst->devices_.end(),
                   [](const PhysicalDevice& x, const PhysicalDevice& y) {
                     return preference(x.type) < preference(y.type);
                   });
  for (size_t i = 0; i < inst->devices_.size(); ++i) inst->devices_[i].name = "Vulkan" + std::to_string(i);
  return inst;
}

Instance::~Instance() {
  if (instance_ != VK_NULL_HANDLE) api_.vkDestroyInstance(instance_, nullptr);
}

}  // namespace strata::vk
