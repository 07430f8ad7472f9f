// On-disk facts of GGUF shared by the reader and the writer (internal to format/).
// Layout (little-endian, v2/v3):
//   u32 magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
//   n_kv x { string key, u32 type, value },
//   n_tensors x { string name, u32 n_dims, i64 ne[n_dims], u32 ggml_type, u64 offset },
//   padding to general.alignment, tensor data (offsets relative to this point).
// string = u64 length + bytes; array value = u32 elem_type + u64 count + count values
// (an element of an array of arrays is itself a full array value: elem_type, count, items).
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/gguf.h"

namespace strata::gguf_spec {

constexpr uint32_t kMagic = 0x46554747;  // bytes 'G','G','U','F' read as little-endian u32
constexpr uint32_t kVersionMin = 2;
constexpr uint32_t kVersionMax = 3;
constexpr uint32_t kWriteVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr const char* kAlignmentKey = "general.alignment";
// llama.cpp's GGML_MAX_NAME is 64 including the terminating NUL: longer names are rejected there.
constexpr size_t kMaxTensorNameLlama = 63;
// Arrays of arrays deeper than this are rejected (llama.cpp itself reads no nested arrays).
constexpr int kMaxArrayDepth = 8;
// Total metadata values (array elements included) one file may hold: a bound on the memory a
// hostile file can make the reader allocate (each value is ~48 bytes in memory). Real files hold
// a few hundred thousand (vocab tokens + merges).
constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 24;

inline bool value_type_valid(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufValueType::f64);
}

// Bytes of a scalar value on disk; 0 for string and array (variable size).
inline size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean:
      return 1;
    case GgufValueType::u16:
    case GgufValueType::i16:
      return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32:
      return 4;
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64:
      return 8;
    default:
      return 0;
  }
}

// Smallest number of bytes one value of type t can occupy on disk (for count-vs-size checks
// before anything is allocated).
inline size_t min_value_size(GgufValueType t) {
  if (t == GgufValueType::string) return 8;     // u64 length
  if (t == GgufValueType::array) return 4 + 8;  // elem type + count
  return scalar_size(t);
}

inline bool is_pow2(uint64_t x) {
  return x != 0 && (x & (x - 1)) == 0;
}

}  // namespace strata::gguf_spec
