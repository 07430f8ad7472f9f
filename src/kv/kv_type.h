// KV storage types: the element formats a KV part's rows can be stored in, and what a row costs.
// Row sizes of block types round up to whole blocks.
#pragma once

#include <cstdint>

namespace strata {

enum class KvType {
  f32,       // 4 B/value                              — supported today
  f16,       // 2 B/value                              — planned
  bf16,      // 2 B/value                              — planned
  q8_0,      // 34 B per 32 values (ggml Q8_0)         — planned
  fp8_e4m3,  // 1 B/value + 1 UE8M0 scale per 32 (33 B/32) — planned
  mxfp4,     // 17 B per 32 values (OCP MXFP4)         — planned
  nvfp4,     // 9 B per 16 values (E2M1 + E4M3 scale: V4.1's compressed KV) — a native type only
};
inline constexpr KvType kAllKvTypes[] = {KvType::f32,  KvType::f16,      KvType::bf16,
                                         KvType::q8_0, KvType::fp8_e4m3, KvType::mxfp4};
const char* kv_type_name(KvType t);
bool kv_type_supported(KvType t);  // strata can run with it today (else: planned)
uint64_t kv_row_bytes(KvType t, int64_t width);

}  // namespace strata
