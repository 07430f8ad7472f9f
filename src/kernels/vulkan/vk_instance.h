// A Vulkan instance and the compute-capable physical devices it sees, named as llama.cpp names
// them: "Vulkan0", "Vulkan1", ... in strata's preference order (discrete GPUs, then integrated,
// virtual, other, then CPU implementations such as Mesa's lavapipe; enumeration order within a
// kind), so "Vulkan0" is the default choice.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/vulkan/vk_api.h"

namespace strata::vk {

struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  std::string name;         // "Vulkan0"
  std::string description;  // the driver's device name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t api_version = 0;
  uint32_t queue_family = 0;       // the first family with compute
  uint64_t local_bytes = 0;        // the largest device-local heap
  uint32_t max_storage_range = 0;  // the most bytes one storage-buffer binding covers
  bool timeline = false;           // timeline semaphores (Vulkan 1.2 or VK_KHR_timeline_semaphore)
  uint32_t vendor_id = 0, device_id = 0;
  uint8_t cache_uuid[VK_UUID_SIZE] = {};  // pipelineCacheUUID: the driver build's cache identity
  uint32_t subgroup_size = 0;             // where compute shaders have subgroup arithmetic; else 0
  uint32_t timestamp_bits = 0;            // the compute family's valid timestamp bits (0: no timestamps)
  float timestamp_period = 0;             // ns per timestamp tick
};

const char* device_type_name(VkPhysicalDeviceType t);  // "discrete GPU", "CPU", ...

class Instance {
 public:
  // Errors: no loader, no Vulkan 1.1 instance (each named). devices() may be empty.
  static Result<std::unique_ptr<Instance>> create();
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const Api& api() const { return api_; }
  VkInstance handle() const { return instance_; }
  const std::vector<PhysicalDevice>& devices() const { return devices_; }

 private:
  Instance() = default;
  Api api_;
  VkInstance instance_ = VK_NULL_HANDLE;
  std::vector<PhysicalDevice> devices_;
};

}  // namespace strata::vk
