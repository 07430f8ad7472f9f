#include "model/blocks/device_weights.h"

#include <vector>

#include "base/units.h"

namespace strata {

DeviceWeights::~DeviceWeights() {
  for (Entry& e : entries_)
    if (e.buf.id != 0) dev_->free(e.buf);
}

Status DeviceWeights::bind(Device& dev, const std::string& arch) {
  if (dev_) return err("%s: placed twice", arch.c_str());
  dev_ = &dev;
  arch_ = arch;
  return {};
}

const DeviceBuffer* DeviceWeights::entry(const void* data, size_t bytes, const std::string& what) {
  STRATA_ASSERT(dev_ != nullptr);
  for (const Entry& e : entries_)
    if (e.src == data) return &e.buf;  // a tied output shares token_embd's buffer
  entries_.push_back(Entry{data, bytes, what, DeviceBuffer{}});
  return &entries_.back().buf;
}

Result<DeviceMat> DeviceWeights::mat(const TensorView& t) {
  return DeviceMat{entry(t.data, t.nbytes, t.name), 0, t.nb[1], t.ne[0], t.ne[1], t.type};
}

Result<DeviceMat> DeviceWeights::mat_rows(const TensorView& t, int64_t r0, int64_t nr) {
  if (r0 < 0 || nr < 1 || r0 + nr > t.ne[1])
    return err("%s: rows %lld..%lld of a weight of %lld rows", t.name.c_str(), static_cast<long long>(r0),
               static_cast<long long>(r0 + nr), static_cast<long long>(t.ne[1]));
  STRATA_ASSIGN(DeviceMat m, mat(t));
  m.offset = t.nb[1] * static_cast<size_t>(r0);
  m.out = nr;
  return m;
}

Result<DeviceVec> DeviceWeights::vec(const float* v, int64_t n, const std::string& what) {
  if (!v) return DeviceVec{};
  return DeviceVec{entry(v, sizeof(float) * static_cast<size_t>(n), what), 0, n};
}

uint64_t DeviceWeights::bytes() const {
  uint64_t b = 0;
  for (const Entry& e : entries_) b += e.bytes;
  return b;
}

Status DeviceWeights::commit() {
  STRATA_ASSERT(dev_ != nullptr);
  uint64_t need = 0;
  for (const Entry& e : entries_)
    if (e.buf.id == 0) need += e.bytes;
  const DeviceMemory m = dev_->memory();
  if (dev_->kind() == DeviceKind::device_gpu && m.budget > 0 && m.allocated + need > m.budget)
    return err("%s: the dense weights need %s on %s, over its budget of %s (%s in use)", arch_.c_str(),
               format_bytes(need).c_str(), dev_->name().c_str(), format_bytes(m.budget).c_str(),
               format_bytes(m.allocated).c_str());
  std::vector<Entry*> fresh;
  for (Entry& e : entries_) {
    if (e.buf.id != 0) continue;
    Result<DeviceBuffer> b = dev_->import(e.src, e.bytes, e.what);
    if (!b.ok()) {
      for (Entry* f : fresh) dev_->free(f->buf);
      return b.status();
    }
    e.buf = b.value();
    STRATA_ASSERT(e.buf.id != 0);
    fresh.push_back(&e);
  }
  return {};
}

}  // namespace strata
