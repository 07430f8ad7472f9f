#include "kernels/vulkan/vk_context.h"

#include "kernels/vulkan/vk_pipeline_cache.h"

#include <chrono>
#include <limits>

namespace strata::vk {

namespace {
constexpr uint32_t kMaxSets = 256;  // descriptor sets in flight
size_t align_up_mib(size_t v) {
  return (v + (size_t{1} << 20) - 1) >> 20 << 20;
}
constexpr uint32_t kBindingsPerSet = 8;  // storage buffers per set
}  // namespace

Result<std::unique_ptr<Context>> Context::create(const Instance& inst, const PhysicalDevice& pd,
                                                 bool timeline) {
  std::unique_ptr<Context> c(new Context());
  c->api_ = inst.api();
  c->name_ = pd.name;
  c->timeline_ = pd.timeline && timeline;
  // A blocking wait sleeps until the driver's interrupt wakes the thread (tens of microseconds on
  // a GPU, per submission); polling first keeps a step's short submissions back to back. Not on a
  // CPU device (lavapipe), whose work needs the cores a poll would take.
  c->spin_ = c->timeline_ && pd.type != VK_PHYSICAL_DEVICE_TYPE_CPU;
  const Api& a = c->api_;
  a.vkGetPhysicalDeviceMemoryProperties(pd.handle, &c->mem_props_);
  c->max_storage_range_ = pd.max_storage_range;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = pd.queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkPhysicalDeviceTimelineSemaphoreFeatures tl{};
  tl.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
  tl.timelineSemaphore = VK_TRUE;
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.pNext = c->timeline_ ? &tl : nullptr;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  if (VkResult r = a.vkCreateDevice(pd.handle, &di, nullptr, &c->device_); r != VK_SUCCESS)
    return err("%s (%s): creating the logical device failed: %s", pd.name.c_str(), pd.description.c_str(),
               result_name(r));
  a.vkGetDeviceQueue(c->device_, pd.queue_family, 0, &c->queue_);

  VkCommandPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT | VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pi.queueFamilyIndex = pd.queue_family;
  if (VkResult r = a.vkCreateCommandPool(c->device_, &pi, nullptr, &c->cmd_pool_); r != VK_SUCCESS)
    return err("%s: creating the command pool failed: %s", pd.name.c_str(), result_name(r));
  const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kMaxSets * kBindingsPerSet};
  VkDescriptorPoolCreateInfo dpi{};
  dpi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  dpi.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  dpi.maxSets = kMaxSets;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &size;
  if (VkResult r = a.vkCreateDescriptorPool(c->device_, &dpi, nullptr, &c->set_pool_); r != VK_SUCCESS)
    return err("%s: creating the descriptor pool failed: %s", pd.name.c_str(), result_name(r));
  c->pipeline_cache_path_ = pipeline_cache_path(pd);
  if (!c->pipeline_cache_path_.empty()) {  // a cache that cannot be made leaves the device without one
    const std::vector<uint8_t> data = read_pipeline_cache(c->pipeline_cache_path_, pd);
    VkPipelineCacheCreateInfo pci{};
    pci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
    pci.initialDataSize = data.size();
    pci.pInitialData = data.empty() ? nullptr : data.data();
    if (a.vkCreatePipelineCache(c->device_, &pci, nullptr, &c->pipeline_cache_) == VK_SUCCESS)
      c->pipeline_cache_loaded_ = data.size();
    else
      c->pipeline_cache_ = VK_NULL_HANDLE;
  }
  if (pd.timestamp_bits > 0 && pd.timestamp_period > 0) {
    VkQueryPoolCreateInfo qpi{};
    qpi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    qpi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qpi.queryCount = 2 * kQueryRing;
    if (a.vkCreateQueryPool(c->device_, &qpi, nullptr, &c->queries_) == VK_SUCCESS) {  // else: no timing
      c->timestamp_mask_ = pd.timestamp_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << pd.timestamp_bits) - 1;
      c->timestamp_ns_ = pd.timestamp_period;
    }
  }
  if (c->timeline_) {
    VkSemaphoreTypeCreateInfo ti{};
    ti.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
    ti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    ti.initialValue = 0;
    VkSemaphoreCreateInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
    si.pNext = &ti;
    if (VkResult r = a.vkCreateSemaphore(c->device_, &si, nullptr, &c->sem_); r != VK_SUCCESS)
      return err("%s: creating the timeline semaphore failed: %s", pd.name.c_str(), result_name(r));
  }
  return c;
}

Context::~Context() {
  if (device_ == VK_NULL_HANDLE) return;
  api_.vkDeviceWaitIdle(device_);
  while (!pending_.empty()) {
    Submission& s = pending_.front();
    release(s);
    pending_.pop_front();
  }
  for (auto& spare : spare_)
    for (RawBuffer& b : spare) destroy_buffer(b);
  if (queries_ != VK_NULL_HANDLE) api_.vkDestroyQueryPool(device_, queries_, nullptr);
  if (pipeline_cache_ != VK_NULL_HANDLE) {  // written back when it grew (new pipelines were compiled)
    size_t n = 0;
    if (api_.vkGetPipelineCacheData(device_, pipeline_cache_, &n, nullptr) == VK_SUCCESS &&
        n > pipeline_cache_loaded_) {
      std::vector<uint8_t> data(n);
      if (api_.vkGetPipelineCacheData(device_, pipeline_cache_, &n, data.data()) == VK_SUCCESS) {
        data.resize(n);
        write_pipeline_cache(pipeline_cache_path_, data);
      }
    }
    api_.vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
  }
  if (sem_ != VK_NULL_HANDLE) api_.vkDestroySemaphore(device_, sem_, nullptr);
  if (set_pool_ != VK_NULL_HANDLE) api_.vkDestroyDescriptorPool(device_, set_pool_, nullptr);
  if (cmd_pool_ != VK_NULL_HANDLE) api_.vkDestroyCommandPool(device_, cmd_pool_, nullptr);
  api_.vkDestroyDevice(device_, nullptr);
}

int Context::memory_type(uint32_t bits, VkMemoryPropertyFlags want) const {
  for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i)
    if ((bits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & want) == want) return int(i);
  return -1;
}

Result<RawBuffer> Context::create_buffer(size_t bytes, bool host_visible, const char* what) {
  RawBuffer b;
  b.bytes = (bytes + 15) / 16 * 16;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = b.bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (VkResult r = api_.vkCreateBuffer(device_, &bi, nullptr, &b.buf); r != VK_SUCCESS)
    return err("%s: creating a buffer of %zu bytes for %s failed: %s", name_.c_str(), bytes, what,
               result_name(r));
  VkMemoryRequirements req;
  api_.vkGetBufferMemoryRequirements(device_, b.buf, &req);
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int type = host_visible ? memory_type(req.memoryTypeBits, host)
                          : memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type < 0 && !host_visible) type = memory_type(req.memoryTypeBits, 0);
  if (type < 0) {
    api_.vkDestroyBuffer(device_, b.buf, nullptr);
    return err("%s: no memory type for %s (%s)", name_.c_str(), what,
               host_visible ? "host-visible" : "device");
  }
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = uint32_t(type);
  if (VkResult r = api_.vkAllocateMemory(device_, &ai, nullptr, &b.mem); r != VK_SUCCESS) {
    api_.vkDestroyBuffer(device_, b.buf, nullptr);
    return err("%s: allocating %zu bytes for %s failed: %s", name_.c_str(), bytes, what, result_name(r));
  }
  api_.vkBindBufferMemory(device_, b.buf, b.mem, 0);
  if (host_visible) {
    void* p = nullptr;
    if (VkResult r = api_.vkMapMemory(device_, b.mem, 0, VK_WHOLE_SIZE, 0, &p); r != VK_SUCCESS) {
      destroy_buffer(b);
      return err("%s: mapping %s failed: %s", name_.c_str(), what, result_name(r));
    }
    b.mapped = static_cast<uint8_t*>(p);
  }
  return b;
}

void Context::destroy_buffer(RawBuffer& b) {
  if (b.buf != VK_NULL_HANDLE) api_.vkDestroyBuffer(device_, b.buf, nullptr);
  if (b.mem != VK_NULL_HANDLE) api_.vkFreeMemory(device_, b.mem, nullptr);  // unmaps
  b = RawBuffer{};
}

Result<Submission> Context::begin() {
  if (!failed_.ok()) return failed_.error();
  Submission s;
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = cmd_pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  if (VkResult r = api_.vkAllocateCommandBuffers(device_, &ai, &s.cmd); r != VK_SUCCESS)
    return err("%s: allocating a command buffer failed: %s", name_.c_str(), result_name(r));
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  api_.vkBeginCommandBuffer(s.cmd, &bi);
  if (queries_ != VK_NULL_HANDLE && pending_.size() < kQueryRing) {
    s.query = static_cast<int64_t>((issued_ + 1) % kQueryRing);
    api_.vkCmdResetQueryPool(s.cmd, queries_, 2 * uint32_t(s.query), 2);
    api_.vkCmdWriteTimestamp(s.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 2 * uint32_t(s.query));
  }
  barrier(s.cmd);  // after everything submitted before (submission order alone orders no memory)
  return s;
}

Result<VkDescriptorSet> Context::allocate_set(VkDescriptorSetLayout layout) {
  VkDescriptorSetAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  ai.descriptorPool = set_pool_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  VkResult r = api_.vkAllocateDescriptorSets(device_, &ai, &set);
  if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) {  // the pool is full: drain
    STRATA_TRY(wait(issued_));
    r = api_.vkAllocateDescriptorSets(device_, &ai, &set);
  }
  if (r != VK_SUCCESS)
    return err("%s: allocating a descriptor set failed: %s", name_.c_str(), result_name(r));
  return set;
}

void Context::release(Submission& s) {
  for (RawBuffer& b : s.scratch) {
    const int k = b.mapped != nullptr ? 1 : 0;
    if (spare_bytes_[k] + b.bytes <= kScratchCache) {
      spare_bytes_[k] += b.bytes;
      spare_[k].push_back(b);
    } else {
      destroy_buffer(b);
    }
  }
  if (!s.sets.empty()) api_.vkFreeDescriptorSets(device_, set_pool_, uint32_t(s.sets.size()), s.sets.data());
  if (s.cmd != VK_NULL_HANDLE) api_.vkFreeCommandBuffers(device_, cmd_pool_, 1, &s.cmd);
  if (s.fence != VK_NULL_HANDLE) api_.vkDestroyFence(device_, s.fence, nullptr);
  s = Submission{};
}

Result<RawBuffer> Context::add_scratch(Submission& s, size_t bytes, bool host_visible, const char* what) {
  const int k = host_visible ? 1 : 0;
  std::vector<RawBuffer>& spare = spare_[k];
  size_t best = spare.size();  // the smallest spare buffer that holds `bytes`
  for (size_t i = 0; i < spare.size(); ++i)
    if (spare[i].bytes >= bytes && (best == spare.size() || spare[i].bytes < spare[best].bytes)) best = i;
  if (best < spare.size() && spare[best].bytes <= 2 * bytes + (size_t{1} << 20)) {
    RawBuffer b = spare[best];
    spare[best] = spare.back();
    spare.pop_back();
    spare_bytes_[k] -= b.bytes;
    s.scratch.push_back(b);
    return b;
  }
  // A new one, rounded up (to a power of two below 64 MiB, else to whole MiB) so that steps of
  // slightly different sizes share it.
  size_t want = size_t{64} << 10;
  while (want < bytes && want < (size_t{64} << 20)) want *= 2;
  if (want < bytes) want = align_up_mib(bytes);
  STRATA_ASSIGN(RawBuffer b, create_buffer(want, host_visible, what));
  s.scratch.push_back(b);
  return b;
}

void Context::discard(Submission& s) {
  if (s.cmd != VK_NULL_HANDLE) api_.vkEndCommandBuffer(s.cmd);
  release(s);
}

void Context::barrier(VkCommandBuffer cmd, bool to_host) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  mb.dstAccessMask =
      to_host ? VK_ACCESS_HOST_READ_BIT : VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
  api_.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                            to_host ? VK_PIPELINE_STAGE_HOST_BIT : VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1,
                            &mb, 0, nullptr, 0, nullptr);
}

Result<uint64_t> Context::submit(Submission s) {
  barrier(s.cmd, /*to_host=*/true);  // the host reads staging buffers once the ticket is reached
  if (s.query >= 0)
    api_.vkCmdWriteTimestamp(s.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                             2 * uint32_t(s.query) + 1);
  if (VkResult r = api_.vkEndCommandBuffer(s.cmd); r != VK_SUCCESS) {
    release(s);
    return err("%s: recording a command buffer failed: %s", name_.c_str(), result_name(r));
  }
  const uint64_t t = issued_ + 1;
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &s.cmd;
  VkTimelineSemaphoreSubmitInfo ti{};
  if (timeline_) {
    ti.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
    ti.signalSemaphoreValueCount = 1;
    ti.pSignalSemaphoreValues = &t;
    si.pNext = &ti;
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &sem_;
  } else {
    VkFenceCreateInfo fi{};
    fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    if (VkResult r = api_.vkCreateFence(device_, &fi, nullptr, &s.fence); r != VK_SUCCESS) {
      release(s);
      return err("%s: creating a fence failed: %s", name_.c_str(), result_name(r));
    }
  }
  if (VkResult r = api_.vkQueueSubmit(queue_, 1, &si, s.fence); r != VK_SUCCESS) {
    release(s);
    if (r == VK_ERROR_DEVICE_LOST) failed_ = err("%s: the device was lost", name_.c_str());
    return err("%s: submitting to the queue failed: %s", name_.c_str(), result_name(r));
  }
  s.ticket = issued_ = t;
  pending_.push_back(std::move(s));
  return t;
}

Result<bool> Context::gpu_done(Submission& s, bool block) {
  VkResult r;
  if (timeline_) {
    if (block) {
      VkSemaphoreWaitInfo wi{};
      wi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
      wi.semaphoreCount = 1;
      wi.pSemaphores = &sem_;
      wi.pValues = &s.ticket;
      r = api_.vkWaitSemaphores(device_, &wi, std::numeric_limits<uint64_t>::max());
    } else {
      uint64_t v = 0;
      r = api_.vkGetSemaphoreCounterValue(device_, sem_, &v);
      if (r == VK_SUCCESS && v < s.ticket) return false;
    }
  } else {
    r = block ? api_.vkWaitForFences(device_, 1, &s.fence, VK_TRUE, std::numeric_limits<uint64_t>::max())
              : api_.vkGetFenceStatus(device_, s.fence);
    if (r == VK_NOT_READY) return false;
  }
  if (r == VK_SUCCESS) return true;
  if (r == VK_ERROR_DEVICE_LOST) failed_ = err("%s: the device was lost", name_.c_str());
  return err("%s: waiting for ticket %llu failed: %s", name_.c_str(),
             static_cast<unsigned long long>(s.ticket), result_name(r));
}

bool Context::reached(uint64_t t) {
  while (retired_ < t && !pending_.empty()) {
    auto done = gpu_done(pending_.front(), false);
    if (!done.ok() || !*done) return false;
    Submission& s = pending_.front();
    for (auto& f : s.on_done) f();
    retired_ = s.ticket;
    ++retired_count_;
    uint64_t ts[2] = {0, 0};
    if (s.query >= 0 && api_.vkGetQueryPoolResults(device_, queries_, 2 * uint32_t(s.query), 2, sizeof ts, ts,
                                                   sizeof(uint64_t), VK_QUERY_RESULT_64_BIT) == VK_SUCCESS)
      busy_s_ += static_cast<double>((ts[1] - ts[0]) & timestamp_mask_) * timestamp_ns_ * 1e-9;
    release(s);
    pending_.pop_front();
  }
  return t <= retired_;
}

Status Context::wait(uint64_t t) {
  if (t > issued_)
    return err("%s: waiting for ticket %llu, but only %llu were issued", name_.c_str(),
               static_cast<unsigned long long>(t), static_cast<unsigned long long>(issued_));
  if (spin_ && retired_ < t) {  // poll for up to 2 ms, then block
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    uint64_t v = 0;
    while (api_.vkGetSemaphoreCounterValue(device_, sem_, &v) == VK_SUCCESS && v < t &&
           std::chrono::steady_clock::now() < until) {
    }
  }
  while (retired_ < t) {
    STRATA_TRY(failed_);
    STRATA_ASSIGN(bool done, gpu_done(pending_.front(), true));
    (void)done;
    const uint64_t front = pending_.front().ticket;
    if (!reached(front))
      return err("%s: ticket %llu finished on the device but polling it failed", name_.c_str(),
                 static_cast<unsigned long long>(front));
  }
  return {};
}

}  // namespace strata::vk
