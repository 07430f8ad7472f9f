// RowCache: the storage unit of every per-layer cache: fixed-width f32 rows addressed by an
// absolute index (a token position, or a compressed-entry index).
//
//   linear: capacity = the most rows ever stored (n_ctx); row(i) is slot i.
//   ring:   capacity = a window (+ a batch); row(i) is slot i % capacity, and only the last
//           `capacity` indices written are valid (sliding-window layers, compressor state).
//
// Rows are f32 now; a quantized or paged store can replace this class behind the same
// row()/write_row() contract (callers never assume contiguity across rows).
//
// Host memory (the constructor), or a buffer of a compute device (on_device: the cache of a
// layer whose attention that device runs, kernels/device.h); then device_rows() is what the
// device's ops read, and row() / view() work only when the device's memory is host-visible.
// Or paged: a view of one region of kv/KvPool's allocation through a sequence's block table
// (owns nothing; bytes() is 0: the pool counts them).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#include "base/aligned.h"
#include "base/assert.h"
#include "base/status.h"
#include "kernels/device.h"
#include "kernels/kv_rows.h"

namespace strata {

class RowCache {
 public:
  RowCache() = default;
  RowCache(int64_t width, int64_t capacity, bool ring)
      : width_(width), capacity_(capacity), ring_(ring), data_(aligned_alloc_array<float>(width * capacity)) {
    STRATA_ASSERT(width > 0 && capacity > 0);
    std::memset(data_.get(), 0, bytes());
    view_ = KvRows{data_.get(), width_, capacity_, ring_};
  }
  // Rows in a buffer of `dev` (which outlives the cache); errors are the device's (its budget).
  // A fresh device buffer is not cleared: every row is written before it is read.
  static Result<RowCache> on_device(Device& dev, int64_t width, int64_t capacity, bool ring,
                                    std::string_view what) {
    STRATA_ASSERT(width > 0 && capacity > 0);
    RowCache c;
    c.width_ = width;
    c.capacity_ = capacity;
    c.ring_ = ring;
    STRATA_ASSIGN(c.buf_, dev.alloc(c.bytes(), what));
    c.dev_ = &dev;
    c.view_ = KvRows{reinterpret_cast<float*>(c.buf_.host), width, capacity, ring};
    return c;
  }
  // Rows [stored_rows] of width at offset of the pool's buffer, addressed through `blocks`
  // (max_rows / block_rows entries); both outlive the view.
  static RowCache paged(const DeviceBuffer& pool, size_t offset, int64_t width, int64_t stored_rows,
                        const int32_t* blocks, int64_t max_rows, int64_t block_rows) {
    STRATA_ASSERT(width > 0 && max_rows > 0 && block_rows > 0 && max_rows % block_rows == 0);
    RowCache c;
    c.width_ = width;
    c.capacity_ = max_rows;
    c.pool_ = &pool;
    c.offset_ = offset;
    c.stored_rows_ = stored_rows;
    float* host = pool.host ? reinterpret_cast<float*>(pool.host + offset) : nullptr;
    c.view_ = KvRows{host, width, max_rows, false, blocks, block_rows};
    return c;
  }
  RowCache(RowCache&& o) noexcept { *this = std::move(o); }
  RowCache& operator=(RowCache&& o) noexcept {
    if (this == &o) return *this;
    release();
    width_ = o.width_;
    capacity_ = o.capacity_;
    ring_ = o.ring_;
    data_ = std::move(o.data_);
    dev_ = o.dev_;
    buf_ = o.buf_;
    view_ = o.view_;
    pool_ = o.pool_;
    offset_ = o.offset_;
    stored_rows_ = o.stored_rows_;
    o.pool_ = nullptr;
    o.dev_ = nullptr;
    o.buf_ = DeviceBuffer{};
    o.view_ = {};
    return *this;
  }
  ~RowCache() { release(); }

  int64_t width() const { return width_; }
  int64_t capacity() const { return capacity_; }
  bool ring() const { return ring_; }
  bool paged() const { return pool_ != nullptr; }
  size_t bytes() const { return paged() ? 0 : sizeof(float) * static_cast<size_t>(width_ * capacity_); }
  void clear() {
    if (view_.data) std::memset(view_.data, 0, bytes());
  }

  // [width] f32 row of absolute index i. PRECOND (linear): i < capacity; host-visible memory.
  float* row(int64_t i) {
    STRATA_ASSERT(view_.data != nullptr);
    return view_.row(i);
  }
  const float* row(int64_t i) const {
    STRATA_ASSERT(view_.data != nullptr);
    return view_.row(i);
  }
  // The rows as the attention kernels read them (valid while this cache lives, not moved).
  const KvRows& view() const { return view_; }
  // The rows as a device's ops name them (on_device caches only).
  DeviceRows device_rows() const {
    if (paged())
      return DeviceRows{pool_, offset_,      width_,           capacity_,
                        false, view_.blocks, view_.block_rows, stored_rows_};
    return DeviceRows{dev_ ? &buf_ : nullptr, 0, width_, capacity_, ring_};
  }

 private:
  void release() {
    if (dev_) dev_->free(buf_);
    dev_ = nullptr;
  }

  int64_t width_ = 0;
  int64_t capacity_ = 0;
  bool ring_ = false;
  AlignedPtr<float> data_;
  Device* dev_ = nullptr;  // on_device: the device holding buf_
  DeviceBuffer buf_;
  const DeviceBuffer* pool_ = nullptr;  // paged: the pool's buffer
  size_t offset_ = 0;                   // paged: the region's offset in it
  int64_t stored_rows_ = 0;             // paged: the region's rows
  KvRows view_;
};

}  // namespace strata
