// KvRows: a view of a cache's rows as the attention kernels read them — fixed-width f32 rows
// addressed by an absolute index (a token position, or a compressed-entry index):
//
//   linear: row(i) is slot i (i < capacity);
//   ring:   row(i) is slot i % capacity (only the last `capacity` indices written are valid);
//   paged:  blocks != null: rows come in blocks of block_rows (kv/block_pool.h) and row(i) is slot
//           blocks[i / block_rows]·block_rows + i % block_rows (i < capacity, the table's entries
//           times block_rows; an entry < 0 is a block the sequence does not hold).
//
// slot() is the one place a row is located. The memory belongs to whoever made the view
// (kv/RowCache, kv/KvPool, a device buffer); callers never assume rows are contiguous across
// indices.
#pragma once

#include <cstdint>

#include "base/assert.h"

namespace strata {

struct KvRows {
  float* data = nullptr;
  int64_t width = 0;
  int64_t capacity = 0;
  bool ring = false;
  const int32_t* blocks = nullptr;  // paged: the sequence's block table (capacity / block_rows entries)
  int64_t block_rows = 0;

  float* row(int64_t i) const { return data + slot(i) * width; }
  int64_t slot(int64_t i) const {
    STRATA_ASSERT(i >= 0);
    if (ring) return i % capacity;
    STRATA_ASSERT(i < capacity);
    if (blocks) {
      const int64_t b = blocks[i / block_rows];
      STRATA_ASSERT(b >= 0);
      return b * block_rows + i % block_rows;
    }
    return i;
  }
};

}  // namespace strata
