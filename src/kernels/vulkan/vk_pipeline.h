// A compute pipeline from embedded SPIR-V: its storage-buffer bindings 0..n-1 in set 0 and a
// push-constant block.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/vulkan/vk_api.h"

namespace strata::vk {

struct Pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t bindings = 0;
  uint32_t push_bytes = 0;
};

// cache: the context's pipeline cache (VK_NULL_HANDLE: none).
Result<Pipeline> create_pipeline(const Api& api, VkDevice dev, std::span<const uint32_t> spirv,
                                 uint32_t bindings, uint32_t push_bytes, const char* name,
                                 VkPipelineCache cache = VK_NULL_HANDLE);
void destroy_pipeline(const Api& api, VkDevice dev, Pipeline& p);

}  // namespace strata::vk
