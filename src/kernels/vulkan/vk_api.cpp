#include "kernels/vulkan/vk_api.h"

#include <dlfcn.h>

namespace strata::vk {

Result<Api> load_global() {
  static void* const lib = [] {
    void* h = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    return h != nullptr ? h : dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
  }();
  if (lib == nullptr)
    return err(
        "Vulkan: the loader libvulkan.so.1 is not installed (Debian: apt install libvulkan1 "
        "mesa-vulkan-drivers)");
  Api api;
  api.vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (api.vkGetInstanceProcAddr == nullptr) return err("Vulkan: the loader has no vkGetInstanceProcAddr");
#define STRATA_VK_LOAD(f) api.f = reinterpret_cast<PFN_##f>(api.vkGetInstanceProcAddr(nullptr, #f));
  STRATA_VK_GLOBAL_FNS(STRATA_VK_LOAD)
#undef STRATA_VK_LOAD
  if (api.vkCreateInstance == nullptr) return err("Vulkan: the loader has no vkCreateInstance");
  return api;
}

Status load_instance(Api& api, VkInstance instance) {
#define STRATA_VK_LOAD(f)                                                         \
  api.f = reinterpret_cast<PFN_##f>(api.vkGetInstanceProcAddr(instance, #f));     \
  if (api.f == nullptr && std::string_view(#f) != "vkGetSemaphoreCounterValue" && \
      std::string_view(#f) != "vkWaitSemaphores")                                 \
    return err("Vulkan: the loader has no %s", #f);
  STRATA_VK_INSTANCE_FNS(STRATA_VK_LOAD)
#undef STRATA_VK_LOAD
  return {};
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_INCOMPLETE:
      return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED:
      return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL:
      return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "VK_ERROR_UNKNOWN";
  }
}

}  // namespace strata::vk
