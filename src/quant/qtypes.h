// Tensor element types, numbered as GGUF / ggml number them (the ids are on disk).
// Block layout facts live here; scalar conversion and reference dot products live in the
// per-type files of quant/; SIMD versions in kernels/x86/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata {

enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
  mxfp4 = 39,
  nvfp4 = 40,
  // strata's own, never in a GGUF file: KV rows of E4M3 values with a UE8M0 scale per 32
  // (BlockFp8E4m3; DeepSeek's FP8 KV layout). Not a weight type (type_supported is false).
  fp8_e4m3 = 41,
  count = 42,
};

struct TypeInfo {
  const char* name;    // ggml's name: "f32", "q8_0", "mxfp4", ...
  int64_t block_size;  // elements per block (1 for plain types)
  size_t type_size;    // bytes per block
  bool known;          // a type id GGUF defines (may still be unsupported for compute)
};

// Info for any 32-bit id; unknown ids give known == false.
const TypeInfo& type_info(uint32_t id);
inline const TypeInfo& type_info(GgmlType t) {
  return type_info(static_cast<uint32_t>(t));
}
inline const char* type_name(GgmlType t) {
  return type_info(t).name;
}

// Bytes of a row of n elements; PRECOND: n % block_size == 0.
size_t row_bytes(GgmlType t, int64_t n);

// Types strata can compute with (to_float and vec_dot exist).
bool type_supported(GgmlType t);

// Parse a ggml type name ("q8_0", "MXFP4", ...); returns false if unknown.
bool type_from_name(std::string_view name, GgmlType* out);

// Block structs (byte-exact with ggml). fp16 fields are raw IEEE half bits.
constexpr int QK4_0 = 32;
constexpr int QK8_0 = 32;
constexpr int QK_MXFP4 = 32;
constexpr int QK_NVFP4 = 64;
constexpr int QK_NVFP4_SUB = 16;
constexpr int QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[QK4_0 / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[QK8_0];
};
struct BlockIq4Nl {  // ggml IQ4_NL: Q4_0's layout, nibbles index kIq4NlValues (quant/quant_ref.h)
  uint16_t d;
  uint8_t qs[QK4_0 / 2];
};
struct BlockMxfp4 {
  uint8_t e;  // E8M0 shared exponent
  uint8_t qs[QK_MXFP4 / 2];
};
// NVFP4 (ggml's layout): four 16-element sub-blocks, each with a UE4M3 scale; byte j of sub-block
// s (qs[8s + j]) holds element j in its low nibble and element j + 8 in its high nibble.
// KV rows as DeepSeek stores FP8: value = E4M3(qs[i]) · 2^(e − 127) (quant/fp8_fp4.h codecs).
constexpr int QK_FP8 = 32;
struct BlockFp8E4m3 {
  uint8_t e;  // UE8M0 block scale
  uint8_t qs[QK_FP8];
};
struct BlockNvfp4 {
  uint8_t d[QK_NVFP4 / QK_NVFP4_SUB];  // UE4M3 sub-block scales
  uint8_t qs[QK_NVFP4 / 2];            // E2M1 nibbles
};
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qs[QK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[QK_K / 2];
  uint8_t qh[QK_K / 4];
  int8_t scales[QK_K / 16];
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockMxfp4) == 17);
static_assert(sizeof(BlockFp8E4m3) == 33);
static_assert(sizeof(BlockNvfp4) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace strata
