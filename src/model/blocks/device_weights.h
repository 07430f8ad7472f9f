// DeviceWeights: an architecture's weights on the device its layer ops run on (kernels/device.h),
// planned, then applied: mat() / vec() name each weight as the ops will (a DeviceMat / DeviceVec
// whose buffer is filled in by commit()), each distinct tensor once; commit() checks the whole
// placement against a GPU's budget (an error naming the bytes needed and the budget, before any
// copy) and imports every tensor (a host-visible device uses the mmapped bytes in place, any other
// copies them). The one way every architecture's Architecture::place binds weights to a device.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "base/status.h"
#include "format/tensor_view.h"
#include "kernels/device.h"

namespace strata {

class DeviceWeights {
 public:
  DeviceWeights() = default;
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;
  ~DeviceWeights();

  // Binds to `dev` (which outlives this); an error when already bound.
  Status bind(Device& dev, const std::string& arch);
  Device* device() const { return dev_; }

  // A 2-D weight {in, out} (rows of t's row stride). Its buffer is valid after commit().
  Result<DeviceMat> mat(const TensorView& t);
  // Rows [r0, r0 + nr) of a 2-D weight, as a weight of nr outputs (one group of a grouped projection).
  Result<DeviceMat> mat_rows(const TensorView& t, int64_t r0, int64_t nr);
  // f32 values [n] (norm weights, biases, sink logits); null: an absent vector.
  Result<DeviceVec> vec(const float* v, int64_t n, const std::string& what);
  // Imports everything named since the last commit; on an error nothing new stays on the device.
  Status commit();
  uint64_t bytes() const;  // every tensor named so far

 private:
  struct Entry {
    const void* src = nullptr;  // the host bytes
    size_t bytes = 0;
    std::string what;
    DeviceBuffer buf;  // id 0 until committed
  };
  const DeviceBuffer* entry(const void* data, size_t bytes, const std::string& what);

  Device* dev_ = nullptr;
  std::string arch_;
  std::deque<Entry> entries_;  // stable addresses: DeviceMats point at their buffers
};

}  // namespace strata
