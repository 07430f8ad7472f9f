#include "kernels/vulkan/vk_pipeline.h"

#include <vector>

namespace strata::vk {

Result<Pipeline> create_pipeline(const Api& api, VkDevice dev, std::span<const uint32_t> spirv,
                                 uint32_t bindings, uint32_t push_bytes, const char* name,
                                 VkPipelineCache cache) {
  Pipeline p;
  p.bindings = bindings;
  p.push_bytes = push_bytes;
  std::vector<VkDescriptorSetLayoutBinding> b(bindings);
  for (uint32_t i = 0; i < bindings; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  li.bindingCount = bindings;
  li.pBindings = b.data();
  if (VkResult r = api.vkCreateDescriptorSetLayout(dev, &li, nullptr, &p.set_layout); r != VK_SUCCESS)
    return err("Vulkan: the descriptor set layout of shader %s: %s", name, result_name(r));
  const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pli{};
  pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p.set_layout;
  pli.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
  pli.pPushConstantRanges = &range;
  if (VkResult r = api.vkCreatePipelineLayout(dev, &pli, nullptr, &p.layout); r != VK_SUCCESS) {
    destroy_pipeline(api, dev, p);
    return err("Vulkan: the pipeline layout of shader %s: %s", name, result_name(r));
  }
  VkShaderModuleCreateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mi.codeSize = spirv.size() * sizeof(uint32_t);
  mi.pCode = spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  if (VkResult r = api.vkCreateShaderModule(dev, &mi, nullptr, &module); r != VK_SUCCESS) {
    destroy_pipeline(api, dev, p);
    return err("Vulkan: shader %s was rejected: %s", name, result_name(r));
  }
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.layout = p.layout;
  const VkResult r = api.vkCreateComputePipelines(dev, cache, 1, &ci, nullptr, &p.pipeline);
  api.vkDestroyShaderModule(dev, module, nullptr);
  if (r != VK_SUCCESS) {
    destroy_pipeline(api, dev, p);
    return err("Vulkan: compiling shader %s failed: %s", name, result_name(r));
  }
  return p;
}

void destroy_pipeline(const Api& api, VkDevice dev, Pipeline& p) {
  if (p.pipeline != VK_NULL_HANDLE) api.vkDestroyPipeline(dev, p.pipeline, nullptr);
  if (p.layout != VK_NULL_HANDLE) api.vkDestroyPipelineLayout(dev, p.layout, nullptr);
  if (p.set_layout != VK_NULL_HANDLE) api.vkDestroyDescriptorSetLayout(dev, p.set_layout, nullptr);
  p = Pipeline{};
}

}  // namespace strata::vk
