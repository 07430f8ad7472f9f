#include "kernels/vulkan/vk_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/units.h"

namespace strata {

namespace {

VulkanDeviceInfo info_of(const vk::PhysicalDevice& d) {
  return VulkanDeviceInfo{d.name, d.description, vk::device_type_name(d.type), d.local_bytes, d.timeline};
}

}  // namespace

Result<std::vector<VulkanDeviceInfo>> list_vulkan_devices() {
  STRATA_ASSIGN(auto inst, vk::Instance::create());
  std::vector<VulkanDeviceInfo> out;
  for (const vk::PhysicalDevice& d : inst->devices()) out.push_back(info_of(d));
  return out;
}

Result<std::unique_ptr<VulkanDevice>> VulkanDevice::open(std::string_view name, uint64_t budget_bytes,
                                                         bool timeline) {
  STRATA_ASSIGN(auto inst, vk::Instance::create());
  const auto& devs = inst->devices();
  if (devs.empty())
    return err(
        "Vulkan: no device with Vulkan 1.1 compute (a GPU driver, or Debian's mesa-vulkan-drivers for "
        "lavapipe on the CPU)");
  const vk::PhysicalDevice* pd = name.empty() ? &devs[0] : nullptr;
  std::string names;
  for (const auto& d : devs) {
    if (d.name == name) pd = &d;
    names += (names.empty() ? "" : ", ") + d.name + " (" + d.description + ")";
  }
  if (pd == nullptr)
    return err("Vulkan: no device %.*s; there are %s", int(name.size()), name.data(), names.c_str());
  std::unique_ptr<VulkanDevice> dev(new VulkanDevice());
  dev->info_ = info_of(*pd);
  dev->mem_.budget = budget_bytes;
  // linear.comp's subgroup build where the device has subgroup arithmetic (STRATA_VK_SUBGROUP=0:
  // the shared-memory tree build, as on devices without it).
  const char* sg_env = std::getenv("STRATA_VK_SUBGROUP");
  const uint32_t sg = pd->subgroup_size;
  if (sg >= 4 && sg <= 128 && 128 % sg == 0 && !(sg_env != nullptr && std::strcmp(sg_env, "0") == 0)) {
    dev->subgroup_ = true;
    dev->rows_per_group_ = 128 / sg;
  }
  STRATA_ASSIGN(dev->ctx_, vk::Context::create(*inst, *pd, timeline));
  dev->instance_ = std::move(inst);
  STRATA_TRY(dev->create_pipelines());
  return dev;
}

VulkanDevice::~VulkanDevice() {
  if (!ctx_) return;
  ctx_->idle();  // work in flight ends; its host copies are dropped (nobody waits for them)
  for (auto& [t, p] : linear_) vk::destroy_pipeline(ctx_->api(), ctx_->device(), p);
  for (auto& [t, p] : linear_jobs_) vk::destroy_pipeline(ctx_->api(), ctx_->device(), p);
  for (vk::Pipeline* p : {&swiglu_, &attn_rope_, &attention_, &sparse_attention_})
    vk::destroy_pipeline(ctx_->api(), ctx_->device(), *p);
  for (auto& [id, b] : buffers_) ctx_->destroy_buffer(b.raw);
  ctx_.reset();  // before the instance
}

DeviceTiming VulkanDevice::timing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return DeviceTiming{ctx_->retired_count(), ctx_->busy_seconds()};
}

Result<double> VulkanDevice::copy_bandwidth(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes < 4096) return err("%s: copy_bandwidth of %zu bytes (at least 4 KiB)", name().c_str(), bytes);
  if (mem_.budget > 0 && mem_.allocated + 2 * bytes > mem_.budget)
    return err("%s: copy_bandwidth needs 2 x %s, over the budget's %s left", name().c_str(),
               format_bytes(bytes).c_str(), format_bytes(mem_.budget - mem_.allocated).c_str());
  STRATA_ASSIGN(vk::RawBuffer a, ctx_->create_buffer(bytes, false, "copy_bandwidth source"));
  auto b = ctx_->create_buffer(bytes, false, "copy_bandwidth destination");
  if (!b.ok()) {
    ctx_->destroy_buffer(a);
    return b.error();
  }
  double best = 0;
  Status st;
  for (int rep = 0; rep < 4 && st.ok(); ++rep) {  // the first is a warm-up
    auto s = ctx_->begin();
    if (!s.ok()) {
      st = s.error();
      break;
    }
    const VkBufferCopy c{0, 0, bytes};
    ctx_->api().vkCmdCopyBuffer(s->cmd, a.buf, b->buf, 1, &c);
    const double busy0 = ctx_->busy_seconds();
    auto t = ctx_->submit(std::move(*s));
    if (!t.ok()) {
      st = t.error();
      break;
    }
    st = ctx_->wait(*t);
    const double dt = ctx_->busy_seconds() - busy0;
    if (st.ok() && rep > 0 && dt > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / dt);
  }
  ctx_->destroy_buffer(a);
  ctx_->destroy_buffer(*b);
  if (!st.ok()) return st.error();
  if (best <= 0) return err("%s: the queue has no timestamps to time a copy", name().c_str());
  return best;
}

DeviceMemory VulkanDevice::memory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mem_;
}

Result<DeviceBuffer> VulkanDevice::alloc(size_t bytes, std::string_view what) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string w(what);
  if (bytes == 0) return err("%s: a buffer for %s of 0 bytes", name().c_str(), w.c_str());
  if (mem_.budget > 0 && mem_.allocated + bytes > mem_.budget)
    return err("%s: no room for %s (%s): %s of %s budget in use", name().c_str(), w.c_str(),
               format_bytes(bytes).c_str(), format_bytes(mem_.allocated).c_str(),
               format_bytes(mem_.budget).c_str());
  STRATA_ASSIGN(vk::RawBuffer raw, ctx_->create_buffer(bytes, /*host_visible=*/false, w.c_str()));
  DeviceBuffer b;
  b.id = next_id_++;
  b.bytes = bytes;
  buffers_.emplace(b.id, Buffer{raw, bytes});
  mem_.allocated += bytes;
  mem_.peak = std::max(mem_.peak, mem_.allocated);
  ++mem_.buffers;
  return b;
}

Result<DeviceBuffer> VulkanDevice::import(const void* host, size_t bytes, std::string_view what) {
  if (host == nullptr || bytes == 0)
    return err("%s: importing %.*s: no memory (%zu bytes at %p)", name().c_str(), int(what.size()),
               what.data(), bytes, host);
  STRATA_ASSIGN(DeviceBuffer b, alloc(bytes, what));
  auto t = upload(b, 0, host, bytes);
  if (!t.ok()) {
    free(b);
    return t.error();
  }
  return b;
}

void VulkanDevice::free(DeviceBuffer& b) {
  if (b.id == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(b.id);
  if (it != buffers_.end()) {
    (void)ctx_->wait(ctx_->issued());  // work in flight may still use it
    ctx_->destroy_buffer(it->second.raw);
    mem_.allocated -= it->second.bytes;
    --mem_.buffers;
    buffers_.erase(it);
  }
  b = DeviceBuffer{};
}

Result<const vk::RawBuffer*> VulkanDevice::resolve(const DeviceBuffer& b, size_t offset, size_t bytes,
                                                   const char* op) const {
  auto it = buffers_.find(b.id);
  if (b.id == 0 || it == buffers_.end() || b.host != nullptr)
    return err("%s: %s: buffer %llu is not a live buffer of this device", name().c_str(), op,
               static_cast<unsigned long long>(b.id));
  const size_t size = it->second.bytes;
  if (offset > size || bytes > size - offset)
    return err("%s: %s: %zu bytes at offset %zu are outside buffer %llu of %zu bytes", name().c_str(), op,
               bytes, offset, static_cast<unsigned long long>(b.id), size);
  return &it->second.raw;
}

Result<DeviceTicket> VulkanDevice::upload(const DeviceBuffer& dst, size_t offset, const void* src,
                                          size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  STRATA_ASSIGN(const vk::RawBuffer* d, resolve(dst, offset, bytes, "upload"));
  STRATA_ASSIGN(vk::Submission s, ctx_->begin());
  if (bytes > 0) {
    auto staging = ctx_->create_buffer(bytes, /*host_visible=*/true, "upload staging");
    if (!staging.ok()) {
      ctx_->discard(s);
      return staging.error();
    }
    std::memcpy(staging->mapped, src, bytes);
    const VkBufferCopy region{0, offset, bytes};
    ctx_->api().vkCmdCopyBuffer(s.cmd, staging->buf, d->buf, 1, &region);
    s.scratch.push_back(*staging);
  }
  return ctx_->submit(std::move(s));
}

Result<DeviceTicket> VulkanDevice::download(void* dst, const DeviceBuffer& src, size_t offset, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  STRATA_ASSIGN(const vk::RawBuffer* b, resolve(src, offset, bytes, "download"));
  STRATA_ASSIGN(vk::Submission s, ctx_->begin());
  if (bytes > 0) {
    auto staging = ctx_->create_buffer(bytes, /*host_visible=*/true, "download staging");
    if (!staging.ok()) {
      ctx_->discard(s);
      return staging.error();
    }
    const VkBufferCopy region{offset, 0, bytes};
    ctx_->api().vkCmdCopyBuffer(s.cmd, b->buf, staging->buf, 1, &region);
    s.scratch.push_back(*staging);
    const uint8_t* from = staging->mapped;
    s.on_done.push_back([dst, from, bytes] { std::memcpy(dst, from, bytes); });
  }
  return ctx_->submit(std::move(s));
}

bool VulkanDevice::reached(DeviceTicket t) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ctx_->reached(t);
}

Status VulkanDevice::wait(DeviceTicket t) {
  std::lock_guard<std::mutex> lock(mu_);
  return ctx_->wait(t);
}

}  // namespace strata
