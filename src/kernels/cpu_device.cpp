#include "kernels/cpu_device.h"

#include <cstdlib>
#include <cstring>

#include "base/units.h"

namespace strata {

CpuDevice::CpuDevice(ThreadPool& pool, std::string name, uint64_t budget_bytes)
    : pool_(pool), name_(std::move(name)) {
  mem_.budget = budget_bytes;
}

CpuDevice::~CpuDevice() = default;

DeviceMemory CpuDevice::memory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mem_;
}

Result<DeviceBuffer> CpuDevice::alloc(size_t bytes, std::string_view what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes == 0)
    return err("%s: a buffer for %.*s of 0 bytes", name_.c_str(), int(what.size()), what.data());
  if (mem_.budget > 0 && mem_.allocated + bytes > mem_.budget)
    return err("%s: no room for %.*s (%s): %s of %s budget in use", name_.c_str(), int(what.size()),
               what.data(), format_bytes(bytes).c_str(), format_bytes(mem_.allocated).c_str(),
               format_bytes(mem_.budget).c_str());
  constexpr size_t kAlign = 64;
  void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (p == nullptr)
    return err("%s: allocating %s for %.*s failed", name_.c_str(), format_bytes(bytes).c_str(),
               int(what.size()), what.data());
  DeviceBuffer b;
  b.id = next_id_++;
  b.bytes = bytes;
  b.host = static_cast<uint8_t*>(p);
  buffers_.emplace(b.id, Buffer{AlignedPtr<uint8_t>(b.host), bytes});
  mem_.allocated += bytes;
  mem_.peak = std::max(mem_.peak, mem_.allocated);
  ++mem_.buffers;
  return b;
}

void CpuDevice::free(DeviceBuffer& b) {
  if (b.id == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(b.id);
  if (it != buffers_.end()) {
    mem_.allocated -= it->second.bytes;
    --mem_.buffers;
    buffers_.erase(it);
  }
  b = DeviceBuffer{};
}

Status CpuDevice::check_range(const DeviceBuffer& b, size_t offset, size_t bytes, const char* op) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(b.id);
  if (b.id == 0 || it == buffers_.end() || it->second.mem.get() != b.host)
    return err("%s: %s into buffer %llu, which is not a live buffer of this device", name_.c_str(), op,
               static_cast<unsigned long long>(b.id));
  const size_t size = it->second.bytes;
  if (offset > size || bytes > size - offset)
    return err("%s: %s of %zu bytes at offset %zu is outside buffer %llu of %zu bytes", name_.c_str(), op,
               bytes, offset, static_cast<unsigned long long>(b.id), size);
  return {};
}

Status CpuDevice::check_mat(const DeviceMat& m, const char* what) const {
  if (m.buf == nullptr) return err("%s: run_experts: %s has no buffer", name_.c_str(), what);
  if (m.out < 1 || m.in < 1 || m.row_stride < row_bytes(m.type, m.in))
    return err("%s: run_experts: %s has shape {%lld, %lld} with rows %zu bytes apart", name_.c_str(), what,
               static_cast<long long>(m.in), static_cast<long long>(m.out), m.row_stride);
  return check_range(*m.buf, m.offset,
                     m.row_stride * static_cast<size_t>(m.out - 1) + row_bytes(m.type, m.in), what);
}

Result<DeviceTicket> CpuDevice::upload(const DeviceBuffer& dst, size_t offset, const void* src,
                                       size_t bytes) {
  STRATA_TRY(check_range(dst, offset, bytes, "upload"));
  if (bytes > 0) std::memcpy(dst.host + offset, src, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  return ++issued_;
}

Result<DeviceTicket> CpuDevice::download(void* dst, const DeviceBuffer& src, size_t offset, size_t bytes) {
  STRATA_TRY(check_range(src, offset, bytes, "download"));
  if (bytes > 0) std::memcpy(dst, src.host + offset, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  return ++issued_;
}

Result<DeviceTicket> CpuDevice::run_experts(const DeviceExpertWork& w) {
  if (w.n_run < 0 || w.n_run > w.n_expert || w.K < 1 || w.n < 0 || w.step.d < 1 || w.step.F < 1)
    return err("%s: run_experts on layer %d: %d experts of %d, K %d, %lld tokens", name_.c_str(), w.layer,
               w.n_run, w.n_expert, w.K, static_cast<long long>(w.n));
  if (w.n_run == 0 || w.n == 0) {
    std::lock_guard<std::mutex> lock(mu_);
    return ++issued_;
  }
  arena_.reset();
  const int E = w.n_expert;
  ExpertMat* gate = arena_.alloc<ExpertMat>(static_cast<size_t>(E));
  ExpertMat* up = arena_.alloc<ExpertMat>(static_cast<size_t>(E));
  ExpertMat* down = arena_.alloc<ExpertMat>(static_cast<size_t>(E));
  auto host_mat = [](const DeviceMat& m) {
    return ExpertMat{m.buf->host + m.offset, m.row_stride, m.in, m.type};
  };
  for (int i = 0; i < w.n_run; ++i) {
    const int e = w.experts[i];
    if (e < 0 || e >= E)
      return err("%s: run_experts on layer %d: expert %d of %d", name_.c_str(), w.layer, e, E);
    const DeviceExpert& m = w.mats[i];
    STRATA_TRY(check_mat(m.gate, "gate"));
    STRATA_TRY(check_mat(m.up, "up"));
    STRATA_TRY(check_mat(m.down, "down"));
    const int64_t d = w.step.d, F = w.step.F;
    if (m.gate.in != d || m.up.in != d || m.gate.out != F || m.up.out != F || m.down.in != F ||
        m.down.out != d || m.gate.type != w.mats[0].gate.type || m.up.type != w.mats[0].up.type ||
        m.down.type != w.mats[0].down.type)
      return err("%s: run_experts on layer %d: expert %d's matrices do not have the step's shapes and types",
                 name_.c_str(), w.layer, e);
    gate[e] = host_mat(m.gate);
    up[e] = host_mat(m.up);
    down[e] = host_mat(m.down);
  }
  ExpertFfn s;
  static_cast<ExpertFfnStep&>(s) = w.step;
  s.gate = gate;
  s.up = up;
  s.down = down;
  const int e0 = w.experts[0];
  expert_ffn_prepare(s, gate[e0], up[e0], down[e0], w.x, w.n, w.K, E, pool_.size(), arena_);
  const ExpertFfnJob job{&s, w.experts, w.n_run};
  expert_ffn_run(&job, 1, pool_);
  std::lock_guard<std::mutex> lock(mu_);
  return ++issued_;
}

bool CpuDevice::reached(DeviceTicket t) const {
  std::lock_guard<std::mutex> lock(mu_);
  return t <= issued_;
}

Status CpuDevice::wait(DeviceTicket t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (t > issued_)
    return err("%s: waiting for ticket %llu, but only %llu were issued", name_.c_str(),
               static_cast<unsigned long long>(t), static_cast<unsigned long long>(issued_));
  return {};
}

}  // namespace strata
