// DeviceWeights: an architecture's weights on the device its layer ops run on (kernels/device.h):
// each distinct tensor imported once (a host-visible device uses the mmapped bytes in place, any
// other copies them), handed out as the DeviceMat / DeviceVec the ops name, freed with it. The
// one way every architecture's Architecture::place binds weights to a device.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

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

  // A 2-D weight {in, out} (rows of t's row stride).
  Result<DeviceMat> mat(const TensorView& t);
  // Rows [r0, r0 + nr) of a 2-D weight, as a weight of nr outputs (one group of a grouped projection).
  Result<DeviceMat> mat_rows(const TensorView& t, int64_t r0, int64_t nr);
  // f32 values [n] (norm weights, biases, sink logits); null: an absent vector.
  Result<DeviceVec> vec(const float* v, int64_t n, const std::string& what);

 private:
  Result<const DeviceBuffer*> import(const void* data, size_t bytes, const std::string& what);

  Device* dev_ = nullptr;
  std::deque<DeviceBuffer> bufs_;  // stable addresses: DeviceMats point at them
  std::vector<const void*> src_;   // the host bytes each buffer came from
};

}  // namespace strata
