// The Vulkan API as strata calls it: the loader (libvulkan.so.1) is opened at run time, so a
// machine without it runs strata on the CPU and gets a clear error when it asks for a Vulkan
// device (never a failure to start). Every function strata calls is a pointer in Api, resolved
// through vkGetInstanceProcAddr for one instance.
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include "base/status.h"

namespace strata::vk {

#define STRATA_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance)           \
  X(vkEnumerateInstanceVersion)

#define STRATA_VK_INSTANCE_FNS(X)             \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkCreateDevice)                           \
  X(vkDestroyDevice)                          \
  X(vkDeviceWaitIdle)                         \
  X(vkGetDeviceQueue)                         \
  X(vkCreateBuffer)                           \
  X(vkDestroyBuffer)                          \
  X(vkGetBufferMemoryRequirements)            \
  X(vkAllocateMemory)                         \
  X(vkFreeMemory)                             \
  X(vkBindBufferMemory)                       \
  X(vkMapMemory)                              \
  X(vkUnmapMemory)                            \
  X(vkCreateCommandPool)                      \
  X(vkDestroyCommandPool)                     \
  X(vkAllocateCommandBuffers)                 \
  X(vkFreeCommandBuffers)                     \
  X(vkBeginCommandBuffer)                     \
  X(vkEndCommandBuffer)                       \
  X(vkCmdCopyBuffer)                          \
  X(vkCmdPipelineBarrier)                     \
  X(vkCmdBindPipeline)                        \
  X(vkCmdBindDescriptorSets)                  \
  X(vkCmdPushConstants)                       \
  X(vkCmdDispatch)                            \
  X(vkQueueSubmit)                            \
  X(vkCreateFence)                            \
  X(vkDestroyFence)                           \
  X(vkGetFenceStatus)                         \
  X(vkWaitForFences)                          \
  X(vkCreateSemaphore)                        \
  X(vkDestroySemaphore)                       \
  X(vkGetSemaphoreCounterValue)               \
  X(vkWaitSemaphores)                         \
  X(vkCreateShaderModule)                     \
  X(vkDestroyShaderModule)                    \
  X(vkCreateDescriptorSetLayout)              \
  X(vkDestroyDescriptorSetLayout)             \
  X(vkCreatePipelineLayout)                   \
  X(vkDestroyPipelineLayout)                  \
  X(vkCreateComputePipelines)                 \
  X(vkDestroyPipeline)                        \
  X(vkCreateDescriptorPool)                   \
  X(vkDestroyDescriptorPool)                  \
  X(vkAllocateDescriptorSets)                 \
  X(vkFreeDescriptorSets)                     \
  X(vkUpdateDescriptorSets)                   \
  X(vkCreateQueryPool)                        \
  X(vkDestroyQueryPool)                       \
  X(vkCmdResetQueryPool)                      \
  X(vkCmdWriteTimestamp)                      \
  X(vkGetQueryPoolResults)                    \
  X(vkCreatePipelineCache)                    \
  X(vkDestroyPipelineCache)                   \
  X(vkGetPipelineCacheData)

#define STRATA_VK_DECLARE(f) PFN_##f f = nullptr;
struct Api {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  STRATA_VK_GLOBAL_FNS(STRATA_VK_DECLARE)
  STRATA_VK_INSTANCE_FNS(STRATA_VK_DECLARE)
};
#undef STRATA_VK_DECLARE

// The loader's global functions (opened once per process); an error naming the library when
// it is not installed.
Result<Api> load_global();
// The instance's functions into api (a copy of load_global's); an error names a missing one.
Status load_instance(Api& api, VkInstance instance);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
const char* result_name(VkResult r);

}  // namespace strata::vk
