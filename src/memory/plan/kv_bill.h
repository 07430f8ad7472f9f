// The KV memory bill: how many bytes a sequence's attention caches take, per token and for a
// context length, for each cache kind and each KV storage type (deepseek-v4.md §5).
//
// Two model families:
//  * classic attention: per layer 2 x n_head_kv x head_dim rows (K and V) per token; layers
//    with a sliding window are capped at the window (a fixed per-sequence ring); MLA models
//    (kv_lora_rank) store one latent of kv_lora_rank + rope dims per token per layer.
//  * deepseek4 (DeepSeek-V4 hybrid attention): per layer a raw-KV window ring (fixed, window
//    rows of head_dim), then by compress ratio: CSA (ratio 4) one compressed row per 4 tokens
//    plus one indexer key row per 4 tokens, HCA (ratio 128) one row per 128 tokens; plus the
//    compressors' rolling state (always f32, fixed per sequence).
//  * deepseek_v41 (V4.1 "CSA2", deepseek-v4.md §4.2): every layer a window ring; only the KV-source
//    layers (Full mode) own a compressed cache (ratio 2 or 1) and, when they are index sources
//    too, the index keys; Reindex and Reuse layers read their source's cache and own none; a
//    ratio-2 source keeps one pending token (kv + score, f32). Each line also has the reference's
//    own storage type ("native": window FP8 + UE8M0 per 32, compressed KV E2M1 + E4M3 scale per
//    16, index keys MXFP4), which gives the official 890 B/token for V4.1-Flash.
// The spec can come from a GGUF (all sizes from its metadata) or from a Hugging Face
// config.json, so the bill can be made before downloading the weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "format/gguf.h"

namespace strata {

// KV storage types the bill prices. Row sizes of block types round up to whole blocks.
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

enum class KvFamily { classic, mla, deepseek4, deepseek_v41 };

// V4.1 layer modes (deepseek-v4.md §4.2; model/v41_config.h derives the same from config.json).
enum class KvLayerMode : uint8_t { window, full, reindex, reuse };
const char* kv_layer_mode_name(KvLayerMode m);

struct KvModelSpec {
  std::string arch;    // general.architecture or HF model_type
  std::string source;  // file the spec came from
  KvFamily family = KvFamily::classic;
  int n_layer = 0;  // main layers (MTP/nextn layers excluded)
  int64_t n_ctx_train = 0;
  int n_swa = 0;  // sliding window (tokens), 0 = none
  // classic / mla
  std::vector<int> n_head_kv;   // [n_layer]
  std::vector<bool> swa_layer;  // [n_layer]
  int head_dim_k = 0, head_dim_v = 0;
  int mla_width = 0;  // kv_lora_rank + rope dims (mla)
  // deepseek4
  int head_dim = 0;  // shared K = V width
  int indexer_head_dim = 0;
  std::vector<int> compress_ratios;  // [n_layer], each 0, 4 or 128 (deepseek_v41: 0, 1 or 2)
  // deepseek_v41
  std::vector<KvLayerMode> layer_mode;  // [n_layer]
  std::vector<int> layer_kv_src;        // [n_layer] the KV source whose compressed cache it reads, -1
  std::vector<bool> layer_index_keys;   // [n_layer] owns index keys (KV source and index source)
  std::vector<int> engram_layers;       // Engram tables: not KV, listed with the caches
  std::vector<int64_t> engram_rows;
  int engram_head_dim = 0, engram_cols = 0;  // engram_cols: rows read per token per table
};

// Reads the spec from GGUF metadata. Errors name the missing/invalid key.
Result<KvModelSpec> kv_spec_from_gguf(const GgufFile& f);
// Reads the spec from a Hugging Face config.json text / file. A V4.1 config (DeepSeek's ModelArgs
// names, as in the checkpoint directory: n_layers, kv_source_layers, ...; or the HF names
// num_hidden_layers, kv_source_layer_ids, ...) gives the deepseek_v41 family.
Result<KvModelSpec> kv_spec_from_hf_config_text(const std::string& text, const std::string& source);
Result<KvModelSpec> kv_spec_from_hf_config(const std::string& path);

// One cache kind of the bill. A line either grows with the context (ratio > 0: one row per
// `ratio` tokens per layer) or is a fixed ring/state of fixed_rows rows per layer.
struct KvBillLine {
  std::string name;  // "csa", "hca", "indexer", "window", "kv", ...
  std::string what;  // human description
  int n_layers = 0;
  int64_t width = 0;        // values per row
  int ratio = 0;            // > 0: grows one row per ratio tokens
  int64_t fixed_rows = 0;   // ratio == 0: rows per layer (capped at the context)
  bool f32_state = false;   // compressor state: always f32 whatever the KV type
  bool has_native = false;  // the reference's own storage type is known
  KvType native = KvType::f32;

  // Rows per layer for a context of n_ctx tokens (ceil for growing lines, as allocations).
  int64_t rows(int64_t n_ctx) const;
  uint64_t row_bytes(KvType t) const;
  uint64_t bytes(KvType t, int64_t n_ctx) const;  // all layers
  double bytes_per_token(KvType t) const;         // growth per token, all layers; 0 when fixed
};

// Appends a line to `lines` unless it holds nothing (n_layers or width <= 0); native: the
// reference's own storage type when known (V4.1), else null.
void kv_bill_add_line(std::vector<KvBillLine>* lines, std::string name, std::string what, int n_layers,
                      int64_t width, int ratio, int64_t fixed_rows, bool f32_state,
                      const KvType* native = nullptr);

struct KvBill {
  KvModelSpec spec;
  std::vector<KvBillLine> lines;

  double bytes_per_token(KvType t) const;               // sum of growing lines
  uint64_t fixed_bytes(KvType t) const;                 // fixed lines at their full size
  uint64_t total_bytes(KvType t, int64_t n_ctx) const;  // everything for one sequence of n_ctx
  // The same at each line's native type (lines without one count at f32); has_native: any line has one.
  bool has_native() const;
  double native_bytes_per_token() const;
  uint64_t native_fixed_bytes() const;
  uint64_t native_total_bytes(int64_t n_ctx) const;
};

KvBill kv_bill_make(const KvModelSpec& spec);

// deepseek_v41 internals (kv_bill_v41.cpp): the spec from a parsed config, and its bill lines.
bool kv_is_v41_config(const nlohmann::json& j);
Result<KvModelSpec> kv_spec_from_v41_json(const nlohmann::json& j, const std::string& source);
void kv_bill_add_v41_lines(const KvModelSpec& spec, std::vector<KvBillLine>* lines);
// Text section of a V4.1 bill: the layer schedule (mode, KV source, what each layer owns) and
// the Engram tables.
std::string kv_bill_v41_text(const KvModelSpec& spec);

// Human-readable bill (tables) and a JSON rendering of the same numbers.
std::string kv_bill_text(const KvBill& bill, int64_t n_ctx);
std::string kv_bill_json(const KvBill& bill, int64_t n_ctx);

}  // namespace strata
