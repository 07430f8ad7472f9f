// The KV memory bill: how many bytes a sequence's attention caches take, per token and for a
// context length, for each cache kind and each KV storage type (deepseek-v4.md §5). The bill
// prices the architecture's own KV spec (kv/kv_spec.h: the parts its caches are allocated from,
// KvPartSpec::rows being the one size formula), grouped into lines of equal parts; it derives no
// size of its own:
//  * a GGUF of an architecture strata runs: that architecture's spec from the file's metadata
//    (arch_kv_spec: the same hyper-parameter reader and spec builder the loaded model uses);
//  * a GGUF of another architecture, or a Hugging Face config.json (priced before downloading
//    the weights): the KV-relevant keys are read into the hyper-parameters of the family's
//    builder — the standard decoder's (K and V per layer, a ring where a layer slides),
//    deepseek4's (window ring, CSA / HCA compressed rows, indexer keys, compressor state) or
//    deepseek_v41's (its config parser and spec: a window ring on every layer, compressed KV and
//    index keys on the KV sources, the reference's own storage types as "native") — or, for MLA
//    models strata does not run, one latent of kv_lora_rank + rope dims per token and layer.
// Rings hold window - 1 + n_batch rows (a step's tokens are written before its first query
// reads them), so the bill takes the step size (the sessions' n_batch, -ub) as well.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "format/gguf.h"
#include "kv/kv_spec.h"
#include "model/deepseek_v41/v41_config.h"

namespace strata {

enum class KvFamily { classic, mla, deepseek4, deepseek_v41 };

// V4.1 layer modes (deepseek-v4.md §4.2): model/deepseek_v41/v41_config.h's schedule.
using KvLayerMode = v41::LayerMode;

// What the bill knows of a model: the KV spec it prices, and facts for the bill's text (none of
// them sizes anything).
struct KvModelSpec {
  std::string arch;    // general.architecture or HF model_type
  std::string source;  // file the spec came from
  KvFamily family = KvFamily::classic;
  int n_layer = 0;  // main layers (MTP/nextn layers excluded)
  int64_t n_ctx_train = 0;
  KvSpec kv;  // the parts, per layer
  // deepseek4 / deepseek_v41 (read off the spec's parts)
  int n_swa = 0, head_dim = 0, indexer_head_dim = 0;
  std::vector<int> compress_ratios;  // [n_layer], each 0, 4 or 128 (deepseek_v41: 0, 1 or 2)
  // deepseek_v41 (from its config's layer schedule)
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
// names, as in the checkpoint directory: n_layers, kv_source_layers, ...; model/deepseek_v41's
// parser reads it) gives the deepseek_v41 family.
Result<KvModelSpec> kv_spec_from_hf_config_text(const std::string& text, const std::string& source);
Result<KvModelSpec> kv_spec_from_hf_config(const std::string& path);

// One line of the bill: n_layers layers holding the same part.
struct KvBillLine {
  KvPartSpec part;  // its name ("csa", "hca", "indexer", "window", "k", "v", ...) names the line
  int n_layers = 0;

  const std::string& name() const { return part.name; }
  const std::string& what() const { return part.what; }

  int64_t rows(int64_t n_ctx, int64_t n_batch) const { return part.rows(n_ctx, n_batch); }  // per layer
  uint64_t row_bytes(KvType t) const { return part.row_bytes(t); }
  uint64_t bytes(KvType t, int64_t n_ctx, int64_t n_batch) const;  // all layers
  double bytes_per_token(KvType t) const;  // growth per token, all layers; 0 when fixed
  bool grows() const { return part.grows(); }
  KvType native() const { return part.has_native ? part.native : KvType::f32; }
};

struct KvBill {
  KvModelSpec spec;
  std::vector<KvBillLine> lines;

  double bytes_per_token(KvType t) const;                                // sum of growing lines
  uint64_t fixed_bytes(KvType t, int64_t n_ctx, int64_t n_batch) const;  // windows and state
  uint64_t total_bytes(KvType t, int64_t n_ctx, int64_t n_batch) const;  // one sequence of n_ctx
  // The same at each line's native type (lines without one count at f32); has_native: any line has one.
  bool has_native() const;
  double native_bytes_per_token() const;
  uint64_t native_fixed_bytes(int64_t n_ctx, int64_t n_batch) const;
  uint64_t native_total_bytes(int64_t n_ctx, int64_t n_batch) const;
};

// Groups the spec's parts into lines (equal parts of several layers: one line).
KvBill kv_bill_make(const KvModelSpec& spec);

// deepseek_v41 (kv_bill_v41.cpp): is this config.json V4.1's; its spec from the config's text;
// the text section of a V4.1 bill (the layer schedule and the Engram tables).
bool kv_is_v41_config(const nlohmann::json& j);
Result<KvModelSpec> kv_spec_from_v41_config(const std::string& text, const std::string& source);
std::string kv_bill_v41_text(const KvModelSpec& spec);

// Human-readable bill (tables) and a JSON rendering of the same numbers.
std::string kv_bill_text(const KvBill& bill, int64_t n_ctx, int64_t n_batch);
std::string kv_bill_json(const KvBill& bill, int64_t n_ctx, int64_t n_batch);

}  // namespace strata
