// The CPU behind the device seam (kernels/device.h): buffers are aligned host memory (host-visible),
// the queue runs each submission when it is made (a ticket is reached on return), the ops are
// kernels/attention_block, kernels/sparse_attention, kernels/expert_ffn and kernels/linear on
// the device's thread pool.
// It holds weights in memory it accounts for exactly (one allocation per buffer, its size as
// asked), under an optional byte budget; imported host memory is used in place.
//
// host_visible = false makes it behave as a device whose memory the process cannot address (a
// GPU's): buffers carry no host pointer, imports are copies, everything goes through the queue.
// Tests run the model through it to show that model/ reads weights and caches only through the
// seam.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "base/aligned.h"
#include "base/arena.h"
#include "base/thread_pool.h"
#include "kernels/device.h"

namespace strata {

class CpuDevice final : public Device {
 public:
  // pool: the threads run_experts computes on (outlives the device). budget_bytes 0: no limit.
  explicit CpuDevice(ThreadPool& pool, std::string name = "CPU", uint64_t budget_bytes = 0,
                     bool host_visible = true);
  ~CpuDevice() override;

  const std::string& name() const override { return name_; }
  DeviceKind kind() const override { return DeviceKind::device_cpu; }
  DeviceMemory memory() const override;

  Result<DeviceBuffer> alloc(size_t bytes, std::string_view what) override;
  Result<DeviceBuffer> import(const void* host, size_t bytes, std::string_view what) override;
  void free(DeviceBuffer& b) override;

  Result<DeviceTicket> upload(const DeviceBuffer& dst, size_t offset, const void* src, size_t bytes) override;
  Result<DeviceTicket> download(void* dst, const DeviceBuffer& src, size_t offset, size_t bytes) override;
  Result<DeviceTicket> run_experts(const DeviceExpertWork& w) override;
  Result<DeviceTicket> run_attention(const DeviceAttnWork& w) override;
  Result<DeviceTicket> run_sparse_attention(const DeviceSparseAttnWork& w) override;
  Result<DeviceTicket> run_ffn(const DeviceFfnWork& w) override;
  Result<DeviceTicket> run_linear(const DeviceLinearWork& w) override;
  bool reached(DeviceTicket t) const override;
  Status wait(DeviceTicket t) override;

 private:
  // The memory of [offset, offset + bytes) of a live buffer of this device; errors name the op,
  // the buffer and the range.
  Result<uint8_t*> resolve(const DeviceBuffer& b, size_t offset, size_t bytes, const char* op) const;
  Result<TensorView> mat_view(const DeviceMat& m, const char* op, const char* what) const;
  Result<const float*> vec_view(const DeviceVec& v, int64_t n, const char* op, const char* what) const;
  // The rows of a cache (end: rows below it are what the op reads or writes; paged tables are
  // checked that far).
  Result<KvRows> rows_view(const DeviceRows& r, int64_t width, int64_t end, const char* op) const;
  DeviceTicket done();

  struct Buffer {
    AlignedPtr<uint8_t> owned;  // null for host memory used in place
    uint8_t* mem = nullptr;
    size_t bytes = 0;
  };
  ThreadPool& pool_;
  std::string name_;
  bool host_visible_;
  mutable std::mutex mu_;
  std::map<uint64_t, Buffer> buffers_;  // live buffers by id
  uint64_t next_id_ = 1;
  DeviceMemory mem_;         // mem_.budget: the limit (0: none)
  DeviceTicket issued_ = 0;  // every ticket issued is reached (the queue runs at submission)
  Arena arena_;              // the ops' scratch when the work brings none
};

}  // namespace strata
