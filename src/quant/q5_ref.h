// The 5-bit types `strata quantize` writes for llama-quantize's fallbacks and K-quant mixes (Q5_0
// / Q5_1 for Q4_K / Q5_K rows that are not a multiple of 256, Q5_K in Q4_K_S / Q5_K_M): block layouts
// byte-exact with ggml and scalar reference conversions / dot products, conventions as in quant_ref.h (Q5_0
// dots with Q8_0 activations, Q5_K with Q8_K). Kept apart from qtypes.h / quant_ref.h so adding them rebuilt
// nothing else.
#pragma once

#include <cstdint>

#include "quant/qtypes.h"

namespace strata {

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit j of the little-endian 32-bit word: the fifth bit of element j
  uint8_t qs[QK4_0 / 2];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[QK4_0 / 2];
};
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;  // d · Σ qs
  int8_t qs[QK8_0];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ5_K) == 176);

// Q5_0: value = d·(q − 16), q = nibble | fifth bit << 4; nibbles ordered as Q4_0's.
void to_float_q5_0(const void* src, float* dst, int64_t n);
void from_float_q5_0(const float* src, void* dst, int64_t n);  // ggml's quantize_row_q5_0_ref
float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* x);

// Q5_1: value = d·q + m, q as Q5_0's (0..31); Q5_K rows that are not a multiple of 256 fall back
// to it. Its activations are Q8_1 (as the x86 ggml builds quantize them: d = amax/127, q =
// round_half_even(x·127/amax), s = fp16(d·Σq)).
void to_float_q5_1(const void* src, float* dst, int64_t n);
void from_float_q5_1(const float* src, void* dst, int64_t n);  // ggml's quantize_row_q5_1_ref
float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* x);
void to_float_q8_1(const void* src, float* dst, int64_t n);
void from_float_q8_1(const float* src, void* dst, int64_t n);

// Q5_K: Q4_K's layout plus a fifth bit per element: element 64·c + l (l < 32) has it in bit 2c of
// qh[l], element 64·c + 32 + l in bit 2c+1. value = d·sc·q − dmin·m, q in 0..31.
void to_float_q5_k(const void* src, float* dst, int64_t n);
void from_float_q5_k(const float* src, void* dst, int64_t n);  // ggml's quantize_row_q5_K_ref (k_fit.cpp)
float vec_dot_q5_k_q8_k(int64_t n, const void* w, const void* x);

}  // namespace strata
