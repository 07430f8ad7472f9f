#include "model/blocks/device_weights.h"

namespace strata {

DeviceWeights::~DeviceWeights() {
  for (DeviceBuffer& b : bufs_) dev_->free(b);
}

Status DeviceWeights::bind(Device& dev, const std::string& arch) {
  if (dev_) return err("%s: placed twice", arch.c_str());
  dev_ = &dev;
  return {};
}

Result<const DeviceBuffer*> DeviceWeights::import(const void* data, size_t bytes, const std::string& what) {
  STRATA_ASSERT(dev_ != nullptr);
  for (size_t i = 0; i < src_.size(); ++i)
    if (src_[i] == data) return &bufs_[i];  // a tied output shares token_embd's buffer
  STRATA_ASSIGN(DeviceBuffer b, dev_->import(data, bytes, what));
  bufs_.push_back(b);
  src_.push_back(data);
  return &bufs_.back();
}

Result<DeviceMat> DeviceWeights::mat(const TensorView& t) {
  STRATA_ASSIGN(const DeviceBuffer* b, import(t.data, t.nbytes, t.name));
  return DeviceMat{b, 0, t.nb[1], t.ne[0], t.ne[1], t.type};
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
  STRATA_ASSIGN(const DeviceBuffer* b, import(v, sizeof(float) * static_cast<size_t>(n), what));
  return DeviceVec{b, 0, n};
}

}  // namespace strata
