// RowCache: the storage unit of every per-layer cache: fixed-width rows of one element type
// (kernels/kv_rows.h: f32 by default; f16, bf16, q8_0, q4_0, iq4_nl for the standard decoders' K / V)
// addressed by an absolute index (a token position, or a compressed-entry index).
//
//   linear: capacity = the most rows ever stored (n_ctx); row(i) is slot i.
//   ring:   capacity = a window (+ a batch); row(i) is slot i % capacity, and only the last
//           `capacity` indices written are valid (sliding-window layers, compressor state).
//
// Every form keeps the same view() / row() contract (callers never assume contiguity across rows). row() is
// the f32 row (f32 caches only); typed rows are written with kernels/kv_rows.h kv_store and read by the
// attention kernels in place.
//
// Host memory (the constructor), or a buffer of a compute device (on_device: the cache of a
// layer whose attention that device runs, kernels/device.h); then device_rows() is what the
// device's ops read, and row() / view() work only when the device's memory is host-visible.
// Or paged: a view of one region of kv/KvPool's allocation through a sequence's block table
// (owns nothing; bytes() is 0: the pool counts them).
#pragma once

#include <algorithm>
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
  // PRECOND: kv_rows_type_ok(type), width a multiple of its block size.
  RowCache(int64_t width, int64_t capacity, bool ring, GgmlType type = GgmlType::f32)
      : width_(width), capacity_(capacity), ring_(ring) {
    STRATA_ASSERT(width > 0 && capacity > 0 && kv_rows_type_ok(type));
    view_ = KvRows::typed(nullptr, width, capacity, ring, type);
    data_ = aligned_alloc_array<uint8_t>(bytes());
    std::memset(data_.get(), 0, bytes());
    view_.data = data_.get();
  }
  // Rows in a buffer of `dev` (which outlives the cache); errors are the device's (its budget).
  // A fresh device buffer is not cleared: every row is written before it is read.
  static Result<RowCache> on_device(Device& dev, int64_t width, int64_t capacity, bool ring,
                                    std::string_view what, GgmlType type = GgmlType::f32) {
    STRATA_ASSERT(width > 0 && capacity > 0 && kv_rows_type_ok(type));
    RowCache c;
    c.width_ = width;
    c.capacity_ = capacity;
    c.ring_ = ring;
    c.view_ = KvRows::typed(nullptr, width, capacity, ring, type);
    STRATA_ASSIGN(c.buf_, dev.alloc(c.bytes(), what));
    c.dev_ = &dev;
    c.view_.data = c.buf_.host;
    return c;
  }
  // Rows [stored_rows] of width and type at offset of the pool's buffer, addressed through `blocks`
  // (max_rows / block_rows entries); both outlive the view.
  static RowCache paged(const DeviceBuffer& pool, size_t offset, int64_t width, GgmlType type,
                        int64_t stored_rows, const int32_t* blocks, int64_t max_rows, int64_t block_rows) {
    STRATA_ASSERT(width > 0 && max_rows > 0 && block_rows > 0 && max_rows % block_rows == 0);
    RowCache c;
    c.width_ = width;
    c.capacity_ = max_rows;
    c.pool_ = &pool;
    c.offset_ = offset;
    c.stored_rows_ = stored_rows;
    c.view_ = KvRows::typed(pool.host ? pool.host + offset : nullptr, width, max_rows, false, type);
    c.view_.blocks = blocks;
    c.view_.block_rows = block_rows;
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
  GgmlType type() const { return view_.type; }
  bool paged() const { return pool_ != nullptr; }
  size_t bytes() const { return paged() ? 0 : view_.row_bytes * static_cast<size_t>(capacity_); }
  // The rows hold Hadamard-rotated head slices (quantized K / V, kernels/kv_rows.h).
  void set_hadamard(bool on) { view_.hadamard = on; }
  void clear() {
    if (view_.data) std::memset(view_.data, 0, bytes());
  }

  // [width] f32 row of absolute index i. PRECOND (linear): i < capacity; f32; host-visible memory.
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
  // Rows [i0, i0 + n) as stored (row_bytes each, absolute indices: a ring's slot i % capacity) out
  // of / into the cache, host or device memory (the device's queue, waited for). PRECOND: not
  // paged; n <= capacity; a ring's rows the last `capacity` written.
  Status read_rows(int64_t i0, int64_t n, uint8_t* out) const { return copy_rows(i0, n, out, nullptr); }
  Status write_rows(int64_t i0, int64_t n, const uint8_t* in) { return copy_rows(i0, n, nullptr, in); }

  // The rows as a device's ops name them (on_device caches only).
  DeviceRows device_rows() const {
    if (paged())
      return DeviceRows{pool_,      offset_,        width_,       capacity_,        false,
                        view_.type, view_.hadamard, view_.blocks, view_.block_rows, stored_rows_};
    return DeviceRows{dev_ ? &buf_ : nullptr, 0, width_, capacity_, ring_, view_.type, view_.hadamard};
  }

 private:
  void release() {
    if (dev_) dev_->free(buf_);
    dev_ = nullptr;
  }
  // read_rows / write_rows: contiguous runs of slots (a ring wraps once at most).
  Status copy_rows(int64_t i0, int64_t n, uint8_t* out, const uint8_t* in) const {
    STRATA_ASSERT(!paged() && i0 >= 0 && n >= 0 && n <= capacity_);
    const size_t rb = view_.row_bytes;
    DeviceTicket last = 0;
    bool queued = false;
    for (int64_t done = 0; done < n;) {
      const int64_t slot = ring_ ? (i0 + done) % capacity_ : i0 + done;
      STRATA_ASSERT(slot < capacity_);
      const int64_t run = std::min(n - done, capacity_ - slot);
      const size_t at = static_cast<size_t>(slot) * rb, len = static_cast<size_t>(run) * rb;
      uint8_t* o = out ? out + static_cast<size_t>(done) * rb : nullptr;
      const uint8_t* w = in ? in + static_cast<size_t>(done) * rb : nullptr;
      if (!dev_) {
        if (o) std::memcpy(o, data_.get() + at, len);
        if (w) std::memcpy(data_.get() + at, w, len);
      } else if (o) {
        STRATA_ASSIGN(last, dev_->download(o, buf_, at, len));
        queued = true;
      } else {
        STRATA_ASSIGN(last, dev_->upload(buf_, at, w, len));
        queued = true;
      }
      done += run;
    }
    return queued ? dev_->wait(last) : Status{};
  }

  int64_t width_ = 0;
  int64_t capacity_ = 0;
  bool ring_ = false;
  AlignedPtr<uint8_t> data_;
  Device* dev_ = nullptr;  // on_device: the device holding buf_
  DeviceBuffer buf_;
  const DeviceBuffer* pool_ = nullptr;  // paged: the pool's buffer
  size_t offset_ = 0;                   // paged: the region's offset in it
  int64_t stored_rows_ = 0;             // paged: the region's rows
  KvRows view_;
};

}  // namespace strata
