// KvRows: a view of a cache's rows as the attention kernels read them — fixed-width f32 rows
// addressed by an absolute index (a token position, or a compressed-entry index):
//
//   linear: row(i) is slot i (i < capacity);
//   ring:   row(i) is slot i % capacity (only the last `capacity` indices written are valid).
//
// The memory belongs to whoever made the view (kv/RowCache, a device buffer); callers never
// assume rows are contiguous across indices.
#pragma once

#include <cstdint>

#include "base/assert.h"

namespace strata {

struct KvRows {
  float* data = nullptr;
  int64_t width = 0;
  int64_t capacity = 0;
  bool ring = false;

  float* row(int64_t i) const { return data + slot(i) * width; }
  int64_t slot(int64_t i) const {
    STRATA_ASSERT(i >= 0);
    if (ring) return i % capacity;
    STRATA_ASSERT(i < capacity);
    return i;
  }
};

}  // namespace strata
