// Cheap seeded weight bytes for the checkpoint synths (synth_deepseek_v41.cpp): no Box-Muller and
// no quantizer in the loop. Every item (a stored element: a BF16 / F32 value, an E4M3 code, a byte
// of two E2M1 codes, a UE8M0 scale) is a table lookup of a 16-bit draw from a counter-based stream
// (splitmix64 of the tensor's key and the item's index), so any range of a tensor is generated
// independently: chunks in parallel, the bytes the same at any thread count.
//   normal  N(0, 1) quantiles at (r + 0.5) / 65536 (|x| <= 4.3), times std, plus mean;
//   E4M3    the normal quantile times 64, rounded to E4M3 (with the UE8M0 scale, weights of the
//           asked std);
//   E2M1    the normal quantile times 2, rounded to E2M1 (0, ±0.5 .. ±6), two codes per byte;
//   UE8M0   a base exponent byte, -1 / +0 / +0 / +1 by the draw (block scales of a real file vary).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/thread_pool.h"

namespace strata::synth_detail {

enum class Code {
  normal_bf16,  // mean + std * N(0, 1), BF16
  normal_f32,   // mean + std * N(0, 1), F32
  uniform_f32,  // U(lo, hi), F32
  embed_bf16,   // N(0, 1) + off * u[item % d], BF16 (router-skew's shared direction)
  fp8,          // E4M3 codes (values of std 64 in code units)
  fp4_pairs,    // bytes of two E2M1 codes, element 2i in the low nibble (DeepSeek's FP4 layout)
  e4m3_any,     // any finite E4M3 code, uniformly (Engram table values)
  ue8m0,        // UE8M0 scale bytes around `base`
};

struct CodeGen {
  Code code = Code::normal_f32;
  float a = 0, b = 1;        // normal: mean, std; uniform: lo, hi; embed: off
  int base = 127;            // ue8m0
  const float* u = nullptr;  // embed: the unit direction [d]
  int64_t d = 0;
};

// Bytes per item of a code.
size_t code_item_bytes(Code c);
// The UE8M0 byte whose scale gives FP8 / FP4 weights about `std`.
int fp8_scale_base(float std);
int fp4_scale_base(float std);
// N(0, 1) quantile r of 65536 (the table every normal item reads).
float normal_quantile(uint32_t r);
// The byte of two E2M1 codes (fp4_pairs) for the 16-bit draw r.
uint8_t fp4_pair_code(uint32_t r);
// The UE8M0 scale byte around `base` for the draw r (its low two bits: -1 / +0 / +0 / +1).
uint8_t ue8m0_code(int base, uint32_t r);

// splitmix64, FNV-1a of a name, and a tensor's stream key from the seed and its name.
uint64_t mix64(uint64_t z);
uint64_t fnv1a(const std::string& s);
uint64_t stream_key(uint64_t seed, const std::string& name);

// Items [begin, begin + n) of the stream `key`, as bytes; begin and n are byte counts, begin a
// multiple of 65536 items. Parallel over 65536-item units.
void fill_codes(const CodeGen& g, uint64_t key, uint8_t* dst, size_t begin, size_t n, ThreadPool& pool);

}  // namespace strata::synth_detail
