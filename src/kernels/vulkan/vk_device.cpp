#include "kernels/vulkan/vk_device.h"

#include <cstring>

#include "base/fp16.h"
#include "base/units.h"
#include "kernels/traits.h"
#include "kernels/vulkan/vk_shaders.h"

namespace strata {

namespace {

VulkanDeviceInfo info_of(const vk::PhysicalDevice& d) {
  return VulkanDeviceInfo{d.name, d.description, vk::device_type_name(d.type), d.local_bytes, d.timeline};
}

// linear.comp's push constants.
struct LinearParams {
  uint32_t w_off, row_stride, n_in, n_out, n_tok, bias_off, has_bias, pad;
};

constexpr uint32_t kMaxGroups = 65535;  // the least maxComputeWorkGroupCount Vulkan allows
constexpr size_t kRegionAlign = 256;    // the largest minStorageBufferOffsetAlignment Vulkan allows

size_t align_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

Result<std::vector<VulkanDeviceInfo>> list_vulkan_devices() {
  STRATA_ASSIGN(auto inst, vk::Instance::create());
  std::vector<VulkanDeviceInfo> out;
  for (const vk::PhysicalDevice& d : inst->devices()) out.push_back(info_of(d));
  return out;
}

Result<std::unique_ptr<VulkanDevice>> VulkanDevice::open(std::string_view name, uint64_t budget_bytes) {
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
  STRATA_ASSIGN(dev->ctx_, vk::Context::create(*inst, *pd));
  dev->instance_ = std::move(inst);
  for (GgmlType t : {GgmlType::f32, GgmlType::f16, GgmlType::q8_0, GgmlType::q4_0}) {
    const std::string what = std::string("linear_") + type_name(t);
    STRATA_ASSIGN(vk::Pipeline p,
                  vk::create_pipeline(dev->ctx_->api(), dev->ctx_->device(), vk::linear_shader(t), 4,
                                      sizeof(LinearParams), what.c_str()));
    dev->linear_.emplace(t, p);
  }
  return dev;
}

VulkanDevice::~VulkanDevice() {
  if (!ctx_) return;
  (void)ctx_->wait(ctx_->issued());
  for (auto& [t, p] : linear_) vk::destroy_pipeline(ctx_->api(), ctx_->device(), p);
  for (auto& [id, b] : buffers_) ctx_->destroy_buffer(b.raw);
  ctx_.reset();  // before the instance
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

Result<DeviceTicket> VulkanDevice::run_experts(const DeviceExpertWork& w) {
  return err("%s: run_experts on layer %d: the Vulkan device has no expert kernels yet", name().c_str(),
             w.layer);
}

Result<DeviceTicket> VulkanDevice::run_attention(const DeviceAttnWork& w) {
  return err("%s: run_attention on layer %d: the Vulkan device has no attention kernels yet", name().c_str(),
             w.layer);
}

Result<DeviceTicket> VulkanDevice::run_ffn(const DeviceFfnWork& w) {
  return err("%s: run_ffn on layer %d: the Vulkan device has no FFN kernels yet", name().c_str(), w.layer);
}

Result<DeviceTicket> VulkanDevice::run_linear(const DeviceLinearWork& w) {
  std::lock_guard<std::mutex> lock(mu_);
  return run_linear_locked(w);
}

Result<DeviceTicket> VulkanDevice::run_linear_locked(const DeviceLinearWork& w) {
  const DeviceMat& m = w.w;
  const char* nm = name().c_str();
  if (m.buf == nullptr) return err("%s: run_linear: weight has no buffer", nm);
  auto pipe = linear_.find(m.type);
  if (pipe == linear_.end())
    return err("%s: run_linear: weight type %s has no Vulkan kernel yet (F32, F16, Q8_0, Q4_0)", nm,
               type_name(m.type));
  const int64_t bs = type_info(m.type).block_size;
  if (m.out < 1 || m.in < 1 || m.in % bs != 0 || m.row_stride < row_bytes(m.type, m.in))
    return err("%s: run_linear: weight has shape {%lld, %lld} with rows %zu bytes apart", nm,
               static_cast<long long>(m.in), static_cast<long long>(m.out), m.row_stride);
  const size_t extent = m.row_stride * static_cast<size_t>(m.out - 1) + row_bytes(m.type, m.in);
  STRATA_ASSIGN(const vk::RawBuffer* wb, resolve(*m.buf, m.offset, extent, "weight"));
  const size_t align = m.type == GgmlType::f32 ? 4 : 2;
  if (m.offset % align != 0 || m.row_stride % align != 0 || m.offset + extent > UINT32_MAX)
    return err(
        "%s: run_linear: weight rows at offset %zu, %zu bytes apart: the kernel needs %zu-byte alignment "
        "and a range within 4 GiB",
        nm, m.offset, m.row_stride, align);
  const vk::RawBuffer* bb = nullptr;
  if (w.bias.buf != nullptr) {
    if (w.bias.n != m.out || w.bias.offset % 4 != 0)
      return err(
          "%s: run_linear: bias has %lld values at offset %zu, expected %lld at a 4-byte aligned offset", nm,
          static_cast<long long>(w.bias.n), w.bias.offset, static_cast<long long>(m.out));
    STRATA_ASSIGN(bb,
                  resolve(*w.bias.buf, w.bias.offset, sizeof(float) * static_cast<size_t>(m.out), "bias"));
  }
  if (w.n < 0 || w.n > kMaxGroups || m.out > int64_t{kMaxGroups} * kMaxGroups)
    return err("%s: run_linear of %lld rows into %lld outputs", nm, static_cast<long long>(w.n),
               static_cast<long long>(m.out));
  if (w.n == 0) {
    STRATA_ASSIGN(vk::Submission s, ctx_->begin());
    return ctx_->submit(std::move(s));
  }

  // x in the device's form of the vec_dot_type (linear.comp), then y: one staging buffer for
  // both directions, one device scratch buffer the shader reads and writes.
  const int64_t n = w.n, in = m.in, out = m.out;
  const bool blocks = m.type == GgmlType::q8_0 || m.type == GgmlType::q4_0;
  const size_t x_bytes = blocks ? static_cast<size_t>(n * (in / 32)) * 36 : static_cast<size_t>(n * in) * 4;
  const size_t y_off = align_up(x_bytes, kRegionAlign), y_bytes = static_cast<size_t>(n * out) * 4;
  STRATA_ASSIGN(vk::Submission s, ctx_->begin());
  auto fail = [&](const Error& e) -> Result<DeviceTicket> {
    ctx_->discard(s);
    return e;
  };
  auto staging = ctx_->create_buffer(y_off + y_bytes, /*host_visible=*/true, "run_linear staging");
  if (!staging.ok()) return fail(staging.error());
  s.scratch.push_back(*staging);
  auto scratch = ctx_->create_buffer(y_off + y_bytes, /*host_visible=*/false, "run_linear activations");
  if (!scratch.ok()) return fail(scratch.error());
  s.scratch.push_back(*scratch);

  uint8_t* xs = staging->mapped;
  if (m.type == GgmlType::f32) {
    std::memcpy(xs, w.x, x_bytes);
  } else if (m.type == GgmlType::f16) {
    const KernelTraits& f16 = kernel_traits(GgmlType::f16);
    std::vector<uint8_t> row(row_bytes(GgmlType::f16, in));
    for (int64_t t = 0; t < n; ++t) {
      f16.from_float(w.x + t * in, row.data(), in);
      f16.to_float(row.data(), reinterpret_cast<float*>(xs) + t * in, in);
    }
  } else {
    const KernelTraits& q8 = kernel_traits(GgmlType::q8_0);
    std::vector<BlockQ8_0> row(static_cast<size_t>(in / 32));
    uint32_t* dst = reinterpret_cast<uint32_t*>(xs);
    for (int64_t t = 0; t < n; ++t) {
      q8.from_float(w.x + t * in, row.data(), in);
      for (const BlockQ8_0& b : row) {
        const float d = fp16_to_f32(b.d);
        std::memcpy(dst, &d, 4);
        std::memcpy(dst + 1, b.qs, 32);
        dst += 9;
      }
    }
  }

  const vk::Api& api = ctx_->api();
  const VkBufferCopy down{0, 0, x_bytes};
  api.vkCmdCopyBuffer(s.cmd, staging->buf, scratch->buf, 1, &down);
  ctx_->barrier(s.cmd);
  const vk::Pipeline& p = pipe->second;
  auto set = ctx_->allocate_set(p.set_layout);
  if (!set.ok()) return fail(set.error());
  s.set = *set;
  const VkDescriptorBufferInfo bufs[4] = {
      {wb->buf, 0, VK_WHOLE_SIZE},
      {scratch->buf, 0, x_bytes},
      {scratch->buf, y_off, y_bytes},
      bb != nullptr ? VkDescriptorBufferInfo{bb->buf, 0, VK_WHOLE_SIZE}
                    : VkDescriptorBufferInfo{scratch->buf, 0, x_bytes},
  };
  VkWriteDescriptorSet writes[4];
  for (uint32_t i = 0; i < 4; ++i) {
    writes[i] = VkWriteDescriptorSet{};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = s.set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &bufs[i];
  }
  api.vkUpdateDescriptorSets(ctx_->device(), 4, writes, 0, nullptr);
  const LinearParams params{static_cast<uint32_t>(m.offset), static_cast<uint32_t>(m.row_stride),
                            static_cast<uint32_t>(in),       static_cast<uint32_t>(out),
                            static_cast<uint32_t>(n),        static_cast<uint32_t>(w.bias.offset / 4),
                            bb != nullptr ? 1u : 0u,         0};
  api.vkCmdBindPipeline(s.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  api.vkCmdBindDescriptorSets(s.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &s.set, 0, nullptr);
  api.vkCmdPushConstants(s.cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(params), &params);
  const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(out, kMaxGroups));
  const uint32_t gy = static_cast<uint32_t>((out + kMaxGroups - 1) / kMaxGroups);
  api.vkCmdDispatch(s.cmd, gx, gy, static_cast<uint32_t>(n));
  ctx_->barrier(s.cmd);
  const VkBufferCopy up{y_off, y_off, y_bytes};
  api.vkCmdCopyBuffer(s.cmd, scratch->buf, staging->buf, 1, &up);
  const uint8_t* from = staging->mapped + y_off;
  float* y = w.y;
  s.on_done.push_back([y, from, y_bytes] { std::memcpy(y, from, y_bytes); });
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
