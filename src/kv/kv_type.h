// KV storage types: the element formats a KV part's rows can be stored in (llama.cpp's names for
// -ctk / -ctv), what a row costs, and the quant/ type that stores them. Row sizes of block types
// round up to whole blocks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "quant/qtypes.h"

namespace strata {

enum class KvType {
  f32,       // 4 B/value
  f16,       // 2 B/value
  bf16,      // 2 B/value
  q8_0,      // 34 B per 32 values (ggml Q8_0)
  q4_0,      // 18 B per 32 values (ggml Q4_0)
  iq4_nl,    // 18 B per 32 values (ggml IQ4_NL: Q4_0's layout, a non-linear 4-bit grid)
  fp8_e4m3,  // 1 B/value + 1 UE8M0 scale per 32 (33 B/32: quant/ BlockFp8E4m3)
  mxfp4,     // 17 B per 32 values (OCP MXFP4, ggml's blocks)
  nvfp4,     // 9 B per 16 values (E2M1 + E4M3 scale: V4.1's compressed KV) — a native type only
};
inline constexpr KvType kAllKvTypes[] = {KvType::f32,  KvType::f16,    KvType::bf16,     KvType::q8_0,
                                         KvType::q4_0, KvType::iq4_nl, KvType::fp8_e4m3, KvType::mxfp4};
const char* kv_type_name(KvType t);
bool kv_type_supported(KvType t);  // strata can run with it today (else: planned)
uint64_t kv_row_bytes(KvType t, int64_t width);
// The quant/ type a supported KV type's rows are stored as (kernels/kv_rows.h); f32 otherwise.
GgmlType kv_storage_type(KvType t);
// Quantized (block) types: llama.cpp Hadamard-rotates those K / V rows by default.
bool kv_type_quantized(KvType t);
// A type by its name ("f16", "q8_0", "fp8" for fp8_e4m3); the error lists the types strata runs
// (planned: also the planned types, which `strata plan` prices).
Result<KvType> kv_type_from_name(std::string_view name, bool planned = false);
std::string kv_supported_names();  // "f32, f16, bf16, q8_0, q4_0, iq4_nl"

// The KV element types a sequence's caches use (llama.cpp's -ctk / -ctv, and --kv-type-index for
// DeepSeek's indexer keys) and whether quantized rows are Hadamard-rotated (--kv-rotate).
struct KvTypes {
  KvType k = KvType::f32;
  KvType v = KvType::f32;
  bool rotate = true;
  // A tool's default, not asked for: an architecture whose caches are f32 only takes f32.
  bool is_default = false;
  bool v_asked = false;    // -ctv was given (K = V architectures say they ignore it)
  bool has_index = false;  // --kv-type-index was given; else the indexer keys take k
  KvType index = KvType::f32;
  KvType index_type() const { return has_index ? index : k; }
  bool operator==(const KvTypes&) const = default;
};

// For architectures whose caches stay f32: an error naming the architecture and the type asked
// for (none for a tool's default: they take f32).
Status kv_types_f32_only(const KvTypes& t, const char* arch);

}  // namespace strata
