// The CPU behind the device seam (kernels/device.h): buffers are aligned host memory (host-visible),
// the queue runs each submission when it is made (a ticket is reached on return), run_experts is
// kernels/expert_ffn on the device's thread pool. It holds weights in memory it accounts for
// exactly (one allocation per buffer, its size as asked), under an optional byte budget.
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
  explicit CpuDevice(ThreadPool& pool, std::string name = "CPU", uint64_t budget_bytes = 0);
  ~CpuDevice() override;

  const std::string& name() const override { return name_; }
  DeviceKind kind() const override { return DeviceKind::device_cpu; }
  DeviceMemory memory() const override;

  Result<DeviceBuffer> alloc(size_t bytes, std::string_view what) override;
  void free(DeviceBuffer& b) override;

  Result<DeviceTicket> upload(const DeviceBuffer& dst, size_t offset, const void* src, size_t bytes) override;
  Result<DeviceTicket> download(void* dst, const DeviceBuffer& src, size_t offset, size_t bytes) override;
  Result<DeviceTicket> run_experts(const DeviceExpertWork& w) override;
  bool reached(DeviceTicket t) const override;
  Status wait(DeviceTicket t) override;

 private:
  // Checks that [offset, offset + bytes) lies in a live buffer of this device.
  Status check_range(const DeviceBuffer& b, size_t offset, size_t bytes, const char* op) const;
  Status check_mat(const DeviceMat& m, const char* what) const;

  struct Buffer {
    AlignedPtr<uint8_t> mem;
    size_t bytes = 0;
  };
  ThreadPool& pool_;
  std::string name_;
  mutable std::mutex mu_;
  std::map<uint64_t, Buffer> buffers_;  // live buffers by id
  uint64_t next_id_ = 1;
  DeviceMemory mem_;         // mem_.budget: the limit (0: none)
  DeviceTicket issued_ = 0;  // every ticket issued is reached (the queue runs at submission)
  Arena arena_;              // run_experts' scratch
};

}  // namespace strata
