// DeepSeek-V4.1-Flash (`deepseek_v41`) configuration: config.json (upstream ModelArgs key names)
// and engram_meta.json (Engram hashing constants + normalised token map), both validated here
// so the forward never meets an inconsistent model (fixtures-v41 README; deepseek-v4.md §4).
//
// Layer modes (README "Layer modes"): ratio 0 = window only; a layer in kv_source_layers is
// Full (own compressor, and index keys if it is also an index source); an index source that is
// not a KV source is Reindex (own indexer weights over its KV source's index keys); any other
// compressed layer is Reuse (KV of the latest KV source, selection of the latest index source).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace strata::v41 {

enum class LayerMode { window, full, reindex, reuse };
const char* layer_mode_name(LayerMode m);

struct LayerCfg {
  int ratio = 0;
  LayerMode mode = LayerMode::window;
  bool kv_source = false, index_source = false;
  bool owns_index_k = false;  // kv source + index source: wk / k_norm
  int kv_src = -1;            // the KV source whose compressed cache this layer reads
  int idx_src = -1;           // the index source whose selection this layer uses (Reuse: latest)
  int engram = -1;            // index into engram_layer_ids, -1: none
};

struct Config {
  int dim = 0, n_layers = 0, vocab = 0, n_heads = 0, head_dim = 0, rope_dim = 0;
  int q_lora = 0, o_groups = 0, o_lora = 0, window = 0;
  float eps = 1e-20f;
  std::vector<int> ratios, kv_sources, index_sources;
  int cand_layer = -1, cand_topk_blocks = 0, cand_block = 0;
  int idx_heads = 0, idx_dim = 0, idx_topk = 0;
  double rope_theta = 10000.0, compress_rope_theta = 160000.0, rope_factor = 1.0;
  int original_seq_len = 0, beta_fast = 32, beta_slow = 1;
  int n_experts = 0, n_active = 0, n_shared = 1, moe_inter = 0;
  std::string score_func = "sqrtsoftplus";
  float route_scale = 1.0f, gate_temp = 1.0f, swiglu_limit = 0.0f;
  bool norm_topk = true;
  int hc = 4, sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  std::vector<int> engram_layers;
  std::vector<int64_t> engram_rows;  // engram_num_embeddings
  int engram_max_ngram = 0, engram_heads = 0, engram_head_dim = 0, engram_pad_token = 0;
  int64_t engram_vocab = 0, engram_compressed_vocab = 0;
  int max_seq_len = 0;
  int fp8_block_r = 128, fp8_block_c = 128;  // quantization_config.weight_block_size (FP8 checkpoints)
  std::vector<LayerCfg> layers;

  int n_hash_cols() const { return (engram_max_ngram - 1) * engram_heads; }  // rows per token per layer
};

struct EngramMeta {
  std::vector<int32_t> token_map;                 // [vocab] raw id -> compressed id
  int64_t pad_id = 0;                             // compressed id of the pad token
  std::vector<std::vector<int64_t>> multipliers;  // [n_engram][max_ngram]
  std::vector<std::vector<int64_t>> primes;       // [n_engram][(max_ngram-1)*heads]
  std::vector<std::vector<int64_t>> offsets;      // [n_engram][(max_ngram-1)*heads]
};

// Parses config.json text; `label` names the file in errors. Validates ranges and the layer
// schedule (sources exist, ratios agree with their source, divisibility).
Result<Config> parse_config(const std::string& text, const std::string& label);
// Parses engram_meta.json and checks it against the config: shapes, token ids < compressed
// vocab, primes summing to engram_num_embeddings, offsets = running sums.
Result<EngramMeta> parse_engram_meta(const std::string& text, const std::string& label, const Config& c);

}  // namespace strata::v41
