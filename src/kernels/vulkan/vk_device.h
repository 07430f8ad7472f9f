// The Vulkan compute device behind the seam (kernels/device.h), on any Vulkan 1.1+ driver: a
// GPU's, or Mesa's lavapipe on the CPU (what CI tests on). Names are llama.cpp's: "Vulkan0",
// "Vulkan1", ... with discrete GPUs first (vk_instance.h).
//
// Buffers are VkBuffers in device-local memory (one allocation each; the process has no pointer
// to them: DeviceBuffer::host is null), accounted exactly like CpuDevice's (bytes as asked,
// under an optional budget); import is alloc + upload. The queue is one Vulkan queue: every call
// records one command buffer, ordered after everything submitted before it, and returns its
// ticket on the device's timeline (a timeline semaphore, or a fence per submission where the
// device has none). upload copies the host bytes into a staging buffer at once; download's
// bytes reach dst when its ticket is reached (reached() / wait() run the host copies).
//
// Ops (vk_ops.cpp), for F32, F16, BF16, Q8_0, Q4_0 and MXFP4 weights: run_linear
// (shaders/linear.comp); run_ffn (gate and up by linear.comp, h = silu(g) ⊙ u by
// shaders/swiglu.comp, which also converts h to down's vec_dot_type on the device, then down by
// linear.comp); run_experts (the same over the run experts' slots, grouped; the three
// activations of kernels/expert_ffn.h; gate / up biases added by linear.comp; down
// bias and routing weight applied on the host). Host activations are converted on the host to
// the weight type's vec_dot_type by the CPU's own converters (f16 / bf16 rounding, Q8_0
// quantization, as kernels/linear does), copied down in one staging buffer, and y is copied up.
// run_attention (vk_attention.cpp): q / k / v by linear.comp (+ biases), per segment the q / k
// norms, RoPE (the host's cos/sin rows) and the K / V rows into the sequence's cache rows
// (contiguous or ring; f32 or f16) by shaders/attn_rope.comp, the causal / sliding-window attention with
// sinks by shaders/attention.comp, o converted for the output weight by swiglu.comp, then the
// output projection (+ bias) by linear.comp. run_sparse_attention (vk_sparse_attention.cpp):
// DeepSeek-V4's attention core by shaders/sparse_attention.comp, its new rows copied into the
// window / compressed rows' buffers first.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/vulkan/vk_context.h"
#include "kernels/vulkan/vk_forms.h"
#include "kernels/vulkan/vk_pipeline.h"

namespace strata {

struct VulkanDeviceInfo {
  std::string name;         // "Vulkan0"
  std::string description;  // the driver's name for it
  std::string type;         // "discrete GPU", "CPU", ...
  uint64_t memory_bytes = 0;
  bool timeline = false;
};

// The Vulkan devices of this machine (empty when there is none); an error when the loader is
// not installed.
Result<std::vector<VulkanDeviceInfo>> list_vulkan_devices();

class VulkanDevice final : public Device {
 public:
  // name "VulkanN", or empty for Vulkan0. Errors: no loader, no Vulkan device, no device of that
  // name (listing those there are), a device that fails to start. timeline false: a fence per
  // submission even where the device has timeline semaphores (the path of devices without them).
  static Result<std::unique_ptr<VulkanDevice>> open(std::string_view name = {}, uint64_t budget_bytes = 0,
                                                    bool timeline = true);
  ~VulkanDevice() override;

  const std::string& name() const override { return info_.name; }
  const VulkanDeviceInfo& info() const { return info_; }
  bool timeline() const { return ctx_->timeline(); }  // the queue's timeline is a timeline semaphore
  DeviceKind kind() const override { return DeviceKind::device_gpu; }
  DeviceMemory memory() const override;

  Result<DeviceBuffer> alloc(size_t bytes, std::string_view what) override;
  Result<DeviceBuffer> import(const void* host, size_t bytes, std::string_view what) override;
  void free(DeviceBuffer& b) override;

  Result<DeviceTicket> upload(const DeviceBuffer& dst, size_t offset, const void* src, size_t bytes) override;
  Result<DeviceTicket> download(void* dst, const DeviceBuffer& src, size_t offset, size_t bytes) override;
  Result<DeviceTicket> run_experts(const DeviceExpertWork& w) override;
  Result<DeviceTicket> run_attention(const DeviceAttnWork& w) override;
  // Rows of every KV type (f32, f16, bf16, q8_0, q4_0, iq4_nl, fp8_e4m3, mxfp4), linear, ring or
  // paged, Hadamard-rotated or not (f16 / bf16: even head dims; block types: head dims of whole
  // blocks).
  bool attention_rows_supported(GgmlType type, bool hadamard) const override {
    (void)hadamard;
    return vk::kv_type_code(type) != ~0u;
  }
  Result<DeviceTicket> run_sparse_attention(
      const DeviceSparseAttnWork& w) override;  // vk_sparse_attention.cpp
  Result<DeviceTicket> run_ffn(const DeviceFfnWork& w) override;
  Result<DeviceTicket> run_linear(const DeviceLinearWork& w) override;
  bool reached(DeviceTicket t) const override;
  Status wait(DeviceTicket t) override;
  DeviceTiming timing() const override;
  Result<double> copy_bandwidth(size_t bytes) override;

 private:
  VulkanDevice() = default;
  Status create_pipelines();  // vk_ops.cpp
  // linear.comp's pipeline for weight type t (jobs: its job-list build), built on first use (a
  // device opens without compiling the builds of types it never runs). Caller holds mu_.
  Result<const vk::Pipeline*> linear_pipeline(GgmlType t, bool jobs);
  Status create_sparse_pipeline();  // vk_sparse_attention.cpp
  // The live buffer b names with [offset, offset + bytes) inside it; errors name the op, the
  // buffer and the range. Caller holds mu_.
  Result<const vk::RawBuffer*> resolve(const DeviceBuffer& b, size_t offset, size_t bytes,
                                       const char* op) const;
  // A matrix's buffer, checked for the linear kernel (type, shape, range, alignment).
  Result<const vk::RawBuffer*> weight(const DeviceMat& m, const char* op, const char* what) const;
  // A range of a VkBuffer bound to a shader.
  struct Region {
    VkBuffer buf = VK_NULL_HANDLE;
    VkDeviceSize offset = 0, bytes = 0;
  };
  static constexpr uint32_t kMaxBindings = 5;
  // Binds p with regions [p.bindings] and its push constants in s.
  Result<VkDescriptorSet> bind(vk::Submission& s, const vk::Pipeline& p, const Region* regions,
                               const void* params);
  // y = x · mᵀ (+ bias) for n rows of x on the device, x in the form of m's vec_dot_type, then a
  // barrier.
  Status record_linear(vk::Submission& s, const DeviceMat& m, const vk::RawBuffer& w,
                       const vk::RawBuffer* bias, size_t bias_offset, const Region& x, const Region& y,
                       int64_t n);
  // One job of a job-list dispatch (linear.comp -DJOBS): matrix m in w over `tokens` (<= 8)
  // consecutive x rows from x_row, y from index y_at advancing by m's out per token, first bias
  // index (~0u: none).
  struct Product {
    const DeviceMat* m = nullptr;
    const vk::RawBuffer* w = nullptr;
    uint32_t x_row = 0, y_at = 0, bias_at = ~0u, tokens = 1;
  };
  // A job-list dispatch: products first .. first + count − 1 of a plan, their matrices inside
  // win of buffer w, their table at table_off.
  struct JobDispatch {
    const DeviceMat* proto = nullptr;  // shape and type
    const vk::RawBuffer* w = nullptr;
    vk::Window win{0, 0};
    size_t first = 0, count = 0, table_off = 0;
  };
  // Products of one shape and type as job-list dispatches: consecutive products in one buffer
  // whose matrices one window of at most max_storage_range covers share one. Each dispatch's table
  // from the next 256-byte boundary at or after table_off; returns the end of the last table.
  size_t plan_jobs(const std::vector<Product>& ps, size_t table_off, std::vector<JobDispatch>* out) const;
  // The planned dispatches' job tables into stage (at their table_off).
  static void write_jobs(const std::vector<Product>& ps, const std::vector<JobDispatch>& ds, uint8_t* stage);
  // A dispatch of a linear pipeline over `rows` output rows (rows_per_group_ per workgroup) and z.
  void dispatch_rows(vk::Submission& s, int64_t rows, uint32_t z);
  // Records planned dispatches (tables already at their offsets in `tables`), then a barrier.
  Status record_jobs(vk::Submission& s, const std::vector<JobDispatch>& ds, VkBuffer tables, const Region& x,
                     const Region& y, const Region* bias);
  Result<DeviceTicket> empty_submission();
  Result<DeviceTicket> run_linear_locked(const DeviceLinearWork& w);
  Result<DeviceTicket> run_ffn_locked(const DeviceFfnWork& w);
  Result<DeviceTicket> run_experts_locked(const DeviceExpertWork& w);
  Result<DeviceTicket> run_attention_locked(const DeviceAttnWork& w);  // vk_attention.cpp
  // A device vector's buffer (absent: null) checked for n values at a 4-byte aligned offset.
  Result<const vk::RawBuffer*> vector(const DeviceVec& v, int64_t n, const char* op, const char* what) const;

  struct Buffer {
    vk::RawBuffer raw;
    size_t bytes = 0;  // as asked
  };
  VulkanDeviceInfo info_;
  std::unique_ptr<vk::Instance> instance_;
  std::unique_ptr<vk::Context> ctx_;
  std::map<GgmlType, vk::Pipeline> linear_;       // linear.comp per weight type (linear_pipeline)
  std::map<GgmlType, vk::Pipeline> linear_jobs_;  // its job-list build
  bool subgroup_ = false;                         // linear_ / linear_jobs_ are the subgroup builds
  uint32_t rows_per_group_ = 1;                   // rows a linear workgroup computes
  vk::Pipeline swiglu_;
  vk::Pipeline attn_rope_, attention_;
  vk::Pipeline sparse_attention_;
  mutable std::mutex mu_;
  std::map<uint64_t, Buffer> buffers_;  // live buffers by id
  uint64_t next_id_ = 1;
  DeviceMemory mem_;  // mem_.budget: the limit (0: none)
};

}  // namespace strata
