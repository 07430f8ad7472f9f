// Where one Engram table's rows live in a checkpoint, and how a raw row becomes the values the
// forward uses (deepseek-v4.md §3.2 / §4.5; fixtures-v41 README "model.safetensors").
//
//   layers.L.engram.embed.weight [rows, head_dim]      F32 (values on the e4m3 grid: fixtures)
//                                                      or F8_E4M3 (the real checkpoint)
//   layers.L.engram.embed.scale  [rows, head_dim/32]   F32 (powers of two: fixtures)
//                                                      or F8_E8M0 / U8 (UE8M0 exponent bytes)
// A row is read as its value bytes and its scale bytes (two ranges of the same shard file);
// engram_row_dequant turns them into bf16(value * scale[col/32]) exactly like the resident path
// (v41 engram_dequant_row), so a streamed row is bit-identical to a resident one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace strata {

class SafetensorsDir;  // format/safetensors_dir.h (not included: headers that include this one
                       // see a second read_text_file)

enum class EngramValueType : uint8_t { f32, f8_e4m3 };
enum class EngramScaleType : uint8_t { f32, e8m0 };  // e8m0: one byte, value 2^(b-127)

struct EngramTable {
  std::string name;  // the values tensor ("layers.1.engram.embed.weight")
  std::string path;  // shard file holding both tensors
  int64_t rows = 0;
  int head_dim = 0;  // multiple of 32
  EngramValueType vtype = EngramValueType::f32;
  EngramScaleType stype = EngramScaleType::f32;
  uint64_t values_offset = 0;  // absolute file offset of row 0's values
  uint64_t scales_offset = 0;  // absolute file offset of row 0's scales

  uint32_t value_row_bytes() const {
    return static_cast<uint32_t>(head_dim) * (vtype == EngramValueType::f32 ? 4 : 1);
  }
  uint32_t scale_row_bytes() const {
    return static_cast<uint32_t>(head_dim / 32) * (stype == EngramScaleType::f32 ? 4 : 1);
  }
  uint32_t row_bytes() const { return value_row_bytes() + scale_row_bytes(); }
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * row_bytes(); }
  uint64_t value_offset(int64_t row) const {
    return values_offset + static_cast<uint64_t>(row) * value_row_bytes();
  }
  uint64_t scale_offset(int64_t row) const {
    return scales_offset + static_cast<uint64_t>(row) * scale_row_bytes();
  }
};

// The table of Engram layer `layer` (the model layer index) from a checkpoint directory: checks
// that both tensors exist in the same shard, their dtypes (values F32 or F8_E4M3, scales F32,
// F8_E8M0 or U8) and shapes ([rows, head_dim], [rows, head_dim/32]). Errors name the directory,
// the shard file and the tensor, expected vs actual.
Result<EngramTable> engram_table_from_checkpoint(const SafetensorsDir& dir, int layer, int64_t rows,
                                                 int head_dim);

// Bookkeeping per cached row of the SSD tier besides its bytes (memory/engram_store.h: key 8,
// state/ref/prefetched/queue flags 4, want and call epochs 8, hash index at load <= 1/2: 2 x 4).
inline constexpr uint64_t kEngramSlotOverhead = 28;

// The SSD tier's staging buffers (one per read in flight: twice the I/O depth or thread count),
// each holding the 4 KiB-aligned covers of one row's values and scales.
int engram_staging_count(int io_depth, int io_threads);
uint64_t engram_staging_bytes(uint32_t value_row_bytes, uint32_t scale_row_bytes);

// One row: `values` value_row_bytes() and `scales` scale_row_bytes() raw bytes (little-endian, as
// in the file) -> out[head_dim] = bf16(value * scale[col/32]) as f32.
void engram_row_dequant(const EngramTable& t, const uint8_t* values, const uint8_t* scales, float* out);

}  // namespace strata
