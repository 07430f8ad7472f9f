// RowCache: the storage unit of every per-layer cache: fixed-width f32 rows addressed by an
// absolute index (a token position, or a compressed-entry index).
//
//   linear: capacity = the most rows ever stored (n_ctx); row(i) is slot i.
//   ring:   capacity = a window (+ a batch); row(i) is slot i % capacity, and only the last
//           `capacity` indices written are valid (sliding-window layers, compressor state).
//
// Rows are f32 now; a quantized or paged store can replace this class behind the same
// row()/write_row() contract (callers never assume contiguity across rows).
#pragma once

#include <cstdint>
#include <cstring>

#include "base/aligned.h"
#include "base/assert.h"

namespace strata {

class RowCache {
 public:
  RowCache() = default;
  RowCache(int64_t width, int64_t capacity, bool ring)
      : width_(width), capacity_(capacity), ring_(ring), data_(aligned_alloc_array<float>(width * capacity)) {
    STRATA_ASSERT(width > 0 && capacity > 0);
    std::memset(data_.get(), 0, sizeof(float) * width * capacity);
  }

  int64_t width() const { return width_; }
  int64_t capacity() const { return capacity_; }
  bool ring() const { return ring_; }
  size_t bytes() const { return sizeof(float) * static_cast<size_t>(width_ * capacity_); }
  void clear() {
    if (data_) std::memset(data_.get(), 0, bytes());
  }

  // [width] f32 row of absolute index i. PRECOND (linear): i < capacity.
  float* row(int64_t i) { return data_.get() + slot(i) * width_; }
  const float* row(int64_t i) const { return data_.get() + slot(i) * width_; }

 private:
  int64_t slot(int64_t i) const {
    STRATA_ASSERT(i >= 0);
    if (ring_) return i % capacity_;
    STRATA_ASSERT(i < capacity_);
    return i;
  }

  int64_t width_ = 0;
  int64_t capacity_ = 0;
  bool ring_ = false;
  AlignedPtr<float> data_;
};

}  // namespace strata
