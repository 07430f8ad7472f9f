// One Vulkan logical device and its in-order queue: raw buffers (device-local, or host-visible
// staging), and submissions on a timeline. A submission is one command buffer with the scratch
// buffers, descriptor set and host copies it needs; its ticket is reached when the GPU has
// finished it and its host copies (a download's staging → host memory) are done. The timeline
// is a timeline semaphore where the device has one, else a fence per submission.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/vulkan/vk_instance.h"

namespace strata::vk {

struct RawBuffer {
  VkBuffer buf = VK_NULL_HANDLE;
  VkDeviceMemory mem = VK_NULL_HANDLE;
  uint8_t* mapped = nullptr;  // host-visible buffers only
  size_t bytes = 0;           // the VkBuffer's size
};

struct Submission {
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> sets;
  std::vector<RawBuffer> scratch;              // freed when reached
  std::vector<std::function<void()>> on_done;  // host work once the GPU finished (in order)
  VkFence fence = VK_NULL_HANDLE;              // the fence path only
  uint64_t ticket = 0;
  int64_t query = -1;  // its timestamps' pair in the context's query pool (-1: none)
};

class Context {
 public:
  // The logical device on pd with one queue of its compute family; timeline false: fences even
  // where pd has timeline semaphores.
  static Result<std::unique_ptr<Context>> create(const Instance& inst, const PhysicalDevice& pd,
                                                 bool timeline);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Api& api() const { return api_; }
  VkDevice device() const { return device_; }
  bool timeline() const { return timeline_; }
  uint32_t max_storage_range() const { return max_storage_range_; }
  // The pipeline cache loaded from disk (vk_pipeline_cache.h; VK_NULL_HANDLE: off), written back
  // when the context is destroyed.
  VkPipelineCache pipeline_cache() const { return pipeline_cache_; }

  // A buffer of `bytes` (rounded up to 16) usable as storage and copy source / destination;
  // host_visible: mapped, coherent memory (staging), else device-local memory where the device
  // has it. Errors name `what` and the driver's result.
  Result<RawBuffer> create_buffer(size_t bytes, bool host_visible, const char* what);
  void destroy_buffer(RawBuffer& b);
  // A buffer of at least `bytes` for s's staging or scratch, back to the context when s is
  // reached: released scratch is kept (up to kScratchCache bytes per memory kind) and handed out
  // again, so a step's submissions allocate no device memory once the sizes have been seen.
  Result<RawBuffer> add_scratch(Submission& s, size_t bytes, bool host_visible, const char* what);
  static constexpr size_t kScratchCache = size_t{256} << 20;
  static constexpr uint32_t kQueryRing = 1024;  // submissions in flight that carry timestamps

  // Every write recorded before it in cmd (or submitted before) is visible after it: to later
  // commands, or to the host (to_host).
  void barrier(VkCommandBuffer cmd, bool to_host = false);
  // A recording command buffer, ordered after every earlier submission; its Submission goes to
  // submit() (or discard()).
  Result<Submission> begin();
  Result<VkDescriptorSet> allocate_set(VkDescriptorSetLayout layout);
  void discard(Submission& s);
  // Ends and submits s; the returned ticket is the next point on the timeline.
  Result<uint64_t> submit(Submission s);

  // Retires what the GPU has finished (runs host copies, frees scratch); true when t is.
  bool reached(uint64_t t);
  // Waits until t is reached; an error for a ticket never issued or a lost device.
  Status wait(uint64_t t);
  uint64_t issued() const { return issued_; }
  // Submissions retired and the GPU time between each one's first and last command (from
  // timestamps; 0 where the queue has none), summed: the device's busy time.
  uint64_t retired_count() const { return retired_count_; }
  double busy_seconds() const { return busy_s_; }
  // Waits until the device is idle (no host copies run: for tearing down).
  void idle() { api_.vkDeviceWaitIdle(device_); }

 private:
  Context() = default;
  Result<bool> gpu_done(Submission& s, bool block);
  void release(Submission& s);
  int memory_type(uint32_t bits, VkMemoryPropertyFlags want) const;

  Api api_;
  std::string name_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkDescriptorPool set_pool_ = VK_NULL_HANDLE;
  VkSemaphore sem_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  bool timeline_ = false;
  bool spin_ = false;  // wait() polls the timeline a while before blocking (a GPU, not a CPU device)
  uint32_t max_storage_range_ = 0;
  uint64_t issued_ = 0;
  uint64_t retired_ = 0;
  std::deque<Submission> pending_;   // in ticket order
  std::vector<RawBuffer> spare_[2];  // released scratch: [0] device-local, [1] host-visible
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  std::string pipeline_cache_path_;
  size_t pipeline_cache_loaded_ = 0;      // bytes read at start
  VkQueryPool queries_ = VK_NULL_HANDLE;  // 2 timestamps per submission in flight (a ring)
  uint64_t timestamp_mask_ = 0;
  double timestamp_ns_ = 0;
  uint64_t retired_count_ = 0;
  double busy_s_ = 0;
  size_t spare_bytes_[2] = {0, 0};
  Status failed_;  // a lost device: every later call reports it
};

}  // namespace strata::vk
