// KvRows: a view of a cache's rows as the attention kernels read them — fixed-width rows of one
// element type (f32, f16, bf16, q8_0, q4_0, iq4_nl, fp8_e4m3, mxfp4: quant/'s layouts) addressed by an
// absolute index (a token position, or a compressed-entry index):
//
//   linear: row(i) is slot i (i < capacity);
//   ring:   row(i) is slot i % capacity (only the last `capacity` indices written are valid);
//   paged:  blocks != null: rows come in blocks of block_rows (kv/block_pool.h) and row(i) is slot
//           blocks[i / block_rows]·block_rows + i % block_rows (i < capacity, the table's entries
//           times block_rows; an entry < 0 is a block the sequence does not hold).
//
// Slot s starts at data + s·row_bytes; slot() is the one place a row is located. Rows of a block
// type hold heads of whole blocks: a head's values start at byte col_bytes(c) of the row (c a
// multiple of the block size). `hadamard`: the rows' head slices were stored Hadamard-rotated
// (kernels/ops.h hadamard_rotate), so queries are rotated before q·k and the attention output
// after Σ p·v. The memory belongs to whoever made the view (kv/RowCache, kv/KvPool, a device
// buffer); callers never assume rows are contiguous across indices.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/assert.h"
#include "quant/qtypes.h"

namespace strata {

struct KvRows {
  uint8_t* data = nullptr;
  int64_t width = 0;
  int64_t capacity = 0;
  bool ring = false;
  GgmlType type = GgmlType::f32;
  size_t row_bytes = 0;
  bool hadamard = false;
  const int32_t* blocks = nullptr;  // paged: the sequence's block table (capacity / block_rows entries)
  int64_t block_rows = 0;

  static KvRows f32(float* d, int64_t width, int64_t capacity, bool ring) {
    return typed(d, width, capacity, ring, GgmlType::f32);
  }
  static KvRows typed(void* d, int64_t width, int64_t capacity, bool ring, GgmlType t) {
    return KvRows{static_cast<uint8_t*>(d), width, capacity, ring, t, strata::row_bytes(t, width), false};
  }

  uint8_t* row_ptr(int64_t i) const { return data + static_cast<size_t>(slot(i)) * row_bytes; }
  // The f32 row of index i. PRECOND: type f32.
  float* row(int64_t i) const {
    STRATA_ASSERT(type == GgmlType::f32);
    return reinterpret_cast<float*>(row_ptr(i));
  }
  size_t col_bytes(int64_t c) const { return strata::row_bytes(type, c); }
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

// Values x[0..n) into row i at value c0 (converted to the rows' type: quant/'s from_float).
// PRECOND: c0 and n multiples of the type's block size.
void kv_store(const KvRows& r, int64_t i, int64_t c0, const float* x, int64_t n);

// Row i's values as f32 into out[width] (the active ISA's to_float, bit-identical to quant/'s;
// f32 rows copied).
void kv_to_f32(const KvRows& r, int64_t i, float* out);

// Whether attention's products over rows of t are the f32 ones over the converted values
// (kernels/ops.h KvRowOps: f16, bf16, fp8_e4m3, mxfp4; f32 itself), so a reader may convert the
// rows once and attend over f32 rows with the same bits; not the block types (q8_0, q4_0,
// iq4_nl: integer dots against a quantized query).
bool kv_rows_read_as_f32(GgmlType t);

// The element types KvRows can hold (the attention kernels read them in place).
bool kv_rows_type_ok(GgmlType t);

}  // namespace strata
