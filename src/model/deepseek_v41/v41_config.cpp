// config.json / engram_meta.json parsing and validation for deepseek_v41 (see v41_config.h).
#include "model/deepseek_v41/v41_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace strata::v41 {

using nlohmann::json;

const char* layer_mode_name(LayerMode m) {
  switch (m) {
    case LayerMode::window:
      return "window";
    case LayerMode::full:
      return "full";
    case LayerMode::reindex:
      return "reindex";
    case LayerMode::reuse:
      return "reuse";
  }
  return "?";
}

namespace {

struct Reader {
  const json& j;
  const std::string& label;
  std::string error;

  const json* get(const char* key, bool required) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (required && error.empty()) error = label + ": key '" + key + "' is missing";
      return nullptr;
    }
    return &*it;
  }
  template <class T>
  void num(const char* key, T* out, bool required = true) {
    const json* v = get(key, required);
    if (!v) return;
    if (!v->is_number()) {
      if (error.empty()) error = label + ": key '" + key + "' is not a number";
      return;
    }
    if constexpr (std::is_integral_v<T>) {
      if (!v->is_number_integer()) {
        if (error.empty()) error = label + ": key '" + key + "' must be an integer";
        return;
      }
      *out = v->get<T>();
    } else {
      *out = static_cast<T>(v->get<double>());
    }
  }
  template <class T>
  void list(const char* key, std::vector<T>* out, bool required = true) {
    const json* v = get(key, required);
    if (!v) return;
    if (!v->is_array()) {
      if (error.empty()) error = label + ": key '" + key + "' is not a list";
      return;
    }
    out->clear();
    for (const auto& e : *v) {
      if (!e.is_number_integer()) {
        if (error.empty()) error = label + ": key '" + key + "' must list integers";
        return;
      }
      out->push_back(e.get<T>());
    }
  }
};

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

Result<Config> parse_config(const std::string& text, const std::string& label) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return err("%s: not valid JSON: %s", label.c_str(), e.what());
  }
  if (!j.is_object()) return err("%s: not a JSON object", label.c_str());
  Config c;
  Reader r{j, label, {}};
  r.num("dim", &c.dim);
  r.num("n_layers", &c.n_layers);
  r.num("vocab_size", &c.vocab);
  r.num("n_heads", &c.n_heads);
  r.num("head_dim", &c.head_dim);
  r.num("rope_head_dim", &c.rope_dim);
  r.num("q_lora_rank", &c.q_lora);
  r.num("o_groups", &c.o_groups);
  r.num("o_lora_rank", &c.o_lora);
  r.num("norm_eps", &c.eps);
  r.num("window_size", &c.window);
  r.list("compress_ratios", &c.ratios);
  r.list("kv_source_layers", &c.kv_sources);
  r.list("index_source_layers", &c.index_sources);
  r.num("candidate_source_layer", &c.cand_layer, false);
  r.num("candidate_topk_blocks", &c.cand_topk_blocks, false);
  r.num("candidate_block_size", &c.cand_block, false);
  r.num("index_n_heads", &c.idx_heads);
  r.num("index_head_dim", &c.idx_dim);
  r.num("index_topk", &c.idx_topk);
  r.num("rope_theta", &c.rope_theta);
  r.num("compress_rope_theta", &c.compress_rope_theta);
  r.num("rope_factor", &c.rope_factor);
  r.num("original_seq_len", &c.original_seq_len);
  r.num("beta_fast", &c.beta_fast);
  r.num("beta_slow", &c.beta_slow);
  r.num("n_routed_experts", &c.n_experts);
  r.num("n_activated_experts", &c.n_active);
  r.num("n_shared_experts", &c.n_shared);
  r.num("moe_inter_dim", &c.moe_inter);
  r.num("route_scale", &c.route_scale);
  r.num("gate_temp", &c.gate_temp, false);
  r.num("swiglu_limit", &c.swiglu_limit, false);
  r.num("hc_mult", &c.hc);
  r.num("hc_sinkhorn_iters", &c.sinkhorn_iters);
  r.num("hc_eps", &c.hc_eps);
  r.list("engram_layer_ids", &c.engram_layers, false);
  r.list("engram_num_embeddings", &c.engram_rows, false);
  r.num("engram_max_ngram_size", &c.engram_max_ngram, false);
  r.num("engram_n_heads", &c.engram_heads, false);
  r.num("engram_head_dim", &c.engram_head_dim, false);
  r.num("engram_pad_id", &c.engram_pad_token, false);
  r.num("engram_vocab_size", &c.engram_vocab, false);
  r.num("engram_compressed_vocab_size", &c.engram_compressed_vocab, false);
  r.num("max_seq_len", &c.max_seq_len, false);
  if (const json* v = r.get("score_func", false); v && v->is_string()) c.score_func = v->get<std::string>();
  if (const json* v = r.get("norm_topk_prob", false); v && v->is_boolean()) c.norm_topk = v->get<bool>();
  if (!r.error.empty()) return Error{r.error};
  const char* L = label.c_str();
  // Weight encodings: bf16 / fp8 (block-scaled E4M3) dense, bf16 / fp4 (MXFP4) experts; the loader
  // converts FP8 / FP4 tensors to f32 by their dtype (v41_ckpt_quant.h).
  if (const json* v = r.get("dtype", false);
      v && !(v->is_string() && (v->get<std::string>() == "bf16" || v->get<std::string>() == "fp8")))
    return err("%s: dtype %s is not supported (bf16 or fp8)", L, v->dump().c_str());
  if (const json* v = r.get("expert_dtype", false);
      v && !v->is_null() &&
      !(v->is_string() && (v->get<std::string>() == "bf16" || v->get<std::string>() == "fp4" ||
                           v->get<std::string>() == "fp8")))
    return err("%s: expert_dtype %s is not supported (null, bf16, fp8 or fp4)", L, v->dump().c_str());
  if (const json* q = r.get("quantization_config", false);
      q && q->is_object() && q->contains("weight_block_size")) {
    const json& b = (*q)["weight_block_size"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
        b[0].get<int64_t>() <= 0 || b[1].get<int64_t>() <= 0 || b[0].get<int64_t>() > 65536 ||
        b[1].get<int64_t>() > 65536)
      return err("%s: quantization_config.weight_block_size %s must be two positive integers", L,
                 b.dump().c_str());
    c.fp8_block_r = static_cast<int>(b[0].get<int64_t>());
    c.fp8_block_c = static_cast<int>(b[1].get<int64_t>());
  }

  auto positive = [&](const char* what, int64_t v) -> Status {
    if (v <= 0) return err("%s: %s = %lld must be > 0", L, what, static_cast<long long>(v));
    return {};
  };
  STRATA_TRY(positive("dim", c.dim));
  STRATA_TRY(positive("n_layers", c.n_layers));
  STRATA_TRY(positive("vocab_size", c.vocab));
  STRATA_TRY(positive("n_heads", c.n_heads));
  STRATA_TRY(positive("head_dim", c.head_dim));
  STRATA_TRY(positive("q_lora_rank", c.q_lora));
  STRATA_TRY(positive("o_groups", c.o_groups));
  STRATA_TRY(positive("o_lora_rank", c.o_lora));
  STRATA_TRY(positive("window_size", c.window));
  STRATA_TRY(positive("n_routed_experts", c.n_experts));
  STRATA_TRY(positive("n_activated_experts", c.n_active));
  STRATA_TRY(positive("moe_inter_dim", c.moe_inter));
  STRATA_TRY(positive("hc_mult", c.hc));
  if (c.hc > 4) return err("%s: hc_mult %d > 4 is not supported", L, c.hc);
  if (c.n_active > c.n_experts)
    return err("%s: n_activated_experts %d > n_routed_experts %d", L, c.n_active, c.n_experts);
  if (c.n_shared != 1) return err("%s: n_shared_experts = %d (only 1 is supported)", L, c.n_shared);
  if (c.score_func != "sqrtsoftplus")
    return err("%s: score_func '%s' (only sqrtsoftplus)", L, c.score_func.c_str());
  if (c.rope_dim <= 0 || c.rope_dim % 2 || c.rope_dim > c.head_dim)
    return err("%s: rope_head_dim %d must be even and in (0, head_dim %d]", L, c.rope_dim, c.head_dim);
  if ((c.n_heads * c.head_dim) % c.o_groups)
    return err("%s: n_heads*head_dim %d not divisible by o_groups %d", L, c.n_heads * c.head_dim, c.o_groups);
  if (c.head_dim % 32) return err("%s: head_dim %d must be a multiple of 32 (FP8 blocks)", L, c.head_dim);
  if (static_cast<int>(c.ratios.size()) < c.n_layers)
    return err("%s: compress_ratios has %zu entries, n_layers is %d", L, c.ratios.size(), c.n_layers);
  c.ratios.resize(static_cast<size_t>(c.n_layers));  // extra entries belong to MTP / DSpark stages
  for (int v : c.kv_sources)
    if (v < 0 || v >= c.n_layers || c.ratios[v] == 0)
      return err("%s: kv_source_layers entry %d is not a compressed layer", L, v);
  for (int v : c.index_sources)
    if (v < 0 || v >= c.n_layers || c.ratios[v] == 0)
      return err("%s: index_source_layers entry %d is not a compressed layer", L, v);
  if (!c.index_sources.empty()) {
    STRATA_TRY(positive("index_n_heads", c.idx_heads));
    STRATA_TRY(positive("index_topk", c.idx_topk));
    if (c.idx_dim <= 0 || c.idx_dim % 32 || c.rope_dim > c.idx_dim)
      return err("%s: index_head_dim %d must be a multiple of 32 and >= rope_head_dim", L, c.idx_dim);
  }
  if (c.cand_layer >= 0) {
    if (c.cand_layer >= c.n_layers || !contains(c.index_sources, c.cand_layer))
      return err("%s: candidate_source_layer %d is not an index source layer", L, c.cand_layer);
    STRATA_TRY(positive("candidate_topk_blocks", c.cand_topk_blocks));
    STRATA_TRY(positive("candidate_block_size", c.cand_block));
  }
  c.layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerCfg& lc = c.layers[l];
    lc.ratio = c.ratios[l];
    if (lc.ratio < 0 || lc.ratio > 2)
      return err("%s: compress_ratios[%d] = %d (V4.1 uses 0, 1 or 2)", L, l, lc.ratio);
    if (lc.ratio == 0) continue;
    lc.kv_source = contains(c.kv_sources, l);
    lc.index_source = contains(c.index_sources, l);
    lc.owns_index_k = lc.kv_source && lc.index_source;
    lc.mode = lc.kv_source ? LayerMode::full : lc.index_source ? LayerMode::reindex : LayerMode::reuse;
    for (int s = l; s >= 0; --s)
      if (c.layers[s].kv_source) {
        lc.kv_src = s;
        break;
      }
    if (lc.kv_src < 0) return err("%s: layer %d (ratio %d) has no KV source at or before it", L, l, lc.ratio);
    if (c.ratios[lc.kv_src] != lc.ratio)
      return err("%s: layer %d has ratio %d but its KV source layer %d has ratio %d", L, l, lc.ratio,
                 lc.kv_src, c.ratios[lc.kv_src]);
    if (lc.index_source) {
      lc.idx_src = l;
      if (!c.layers[lc.kv_src].owns_index_k)
        return err(
            "%s: index source layer %d reads KV source %d, which has no index keys (not an index source)", L,
            l, lc.kv_src);
    } else {
      for (int s = l - 1; s >= 0; --s)
        if (c.layers[s].index_source) {
          lc.idx_src = s;
          break;
        }
      if (lc.idx_src < 0) return err("%s: layer %d reuses a selection but no index source precedes it", L, l);
      if (c.ratios[lc.idx_src] != lc.ratio)
        return err("%s: layer %d (ratio %d) reuses the selection of layer %d (ratio %d)", L, l, lc.ratio,
                   lc.idx_src, c.ratios[lc.idx_src]);
    }
  }
  if (c.cand_layer >= 0)
    for (int l = c.cand_layer + 1; l < c.n_layers; ++l)
      if (c.layers[l].index_source && c.ratios[l] != c.ratios[c.cand_layer])
        return err("%s: layer %d scores inside the candidates of layer %d but their ratios differ", L, l,
                   c.cand_layer);
  // Engram
  if (!c.engram_layers.empty()) {
    if (c.engram_rows.size() != c.engram_layers.size())
      return err("%s: engram_num_embeddings has %zu entries for %zu engram layers", L, c.engram_rows.size(),
                 c.engram_layers.size());
    if (c.engram_max_ngram < 2)
      return err("%s: engram_max_ngram_size %d must be >= 2", L, c.engram_max_ngram);
    STRATA_TRY(positive("engram_n_heads", c.engram_heads));
    STRATA_TRY(positive("engram_compressed_vocab_size", c.engram_compressed_vocab));
    if (c.engram_head_dim <= 0 || c.engram_head_dim % 32)
      return err("%s: engram_head_dim %d must be a positive multiple of 32", L, c.engram_head_dim);
    for (size_t k = 0; k < c.engram_layers.size(); ++k) {
      const int l = c.engram_layers[k];
      if (l < 0 || l >= c.n_layers) return err("%s: engram_layer_ids entry %d out of range", L, l);
      if (c.layers[l].engram >= 0) return err("%s: engram layer %d listed twice", L, l);
      c.layers[l].engram = static_cast<int>(k);
    }
    if (c.engram_pad_token < 0 || c.engram_pad_token >= c.vocab)
      return err("%s: engram_pad_id %d is not a token id", L, c.engram_pad_token);
  }
  return c;
}

Result<EngramMeta> parse_engram_meta(const std::string& text, const std::string& label, const Config& c) {
  const char* L = label.c_str();
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return err("%s: not valid JSON: %s", L, e.what());
  }
  if (!j.is_object()) return err("%s: not a JSON object", L);
  EngramMeta m;
  const size_t nl = c.engram_layers.size();
  const int ng = c.engram_max_ngram, nh = c.engram_heads;
  try {
    auto tm = j.at("token_map");
    if (!tm.is_array() || tm.size() != static_cast<size_t>(c.vocab))
      return err("%s: token_map has %zu entries, expected vocab_size %d", L, tm.is_array() ? tm.size() : 0,
                 c.vocab);
    for (const auto& v : tm) {
      const int64_t id = v.get<int64_t>();
      if (id < 0 || id >= c.engram_compressed_vocab)
        return err("%s: token_map[%zu] = %lld is outside the compressed vocab [0, %lld)", L,
                   m.token_map.size(), static_cast<long long>(id),
                   static_cast<long long>(c.engram_compressed_vocab));
      m.token_map.push_back(static_cast<int32_t>(id));
    }
    m.pad_id = j.at("pad_id").get<int64_t>();
    if (m.pad_id != m.token_map[static_cast<size_t>(c.engram_pad_token)])
      return err("%s: pad_id %lld but token_map[engram_pad_id %d] = %d", L, static_cast<long long>(m.pad_id),
                 c.engram_pad_token, m.token_map[static_cast<size_t>(c.engram_pad_token)]);
    auto mul = j.at("multipliers");
    auto pr = j.at("primes");
    auto off = j.at("offsets");
    if (mul.size() != nl || pr.size() != nl || off.size() != nl)
      return err("%s: multipliers/primes/offsets have %zu/%zu/%zu layers, config lists %zu engram layers", L,
                 mul.size(), pr.size(), off.size(), nl);
    for (size_t k = 0; k < nl; ++k) {
      if (mul[k].size() != static_cast<size_t>(ng))
        return err("%s: multipliers[%zu] has %zu entries, expected engram_max_ngram_size %d", L, k,
                   mul[k].size(), ng);
      std::vector<int64_t> mk;
      for (const auto& v : mul[k]) {
        const int64_t x = v.get<int64_t>();
        // p = c * m must not overflow int64 for any compressed id c.
        if (x < 0 || (c.engram_compressed_vocab > 0 && x > INT64_MAX / c.engram_compressed_vocab))
          return err("%s: multipliers[%zu] = %lld overflows with compressed vocab %lld", L, k,
                     static_cast<long long>(x), static_cast<long long>(c.engram_compressed_vocab));
        mk.push_back(x);
      }
      m.multipliers.push_back(std::move(mk));
      if (pr[k].size() != static_cast<size_t>(ng - 1))
        return err("%s: primes[%zu] has %zu n-gram sizes, expected %d", L, k, pr[k].size(), ng - 1);
      std::vector<int64_t> pk;
      for (const auto& row : pr[k]) {
        if (row.size() != static_cast<size_t>(nh))
          return err("%s: primes[%zu] rows must have engram_n_heads %d entries", L, k, nh);
        for (const auto& v : row) {
          const int64_t p = v.get<int64_t>();
          if (p <= 0) return err("%s: primes[%zu] holds %lld", L, k, static_cast<long long>(p));
          pk.push_back(p);
        }
      }
      std::vector<int64_t> ok;
      for (const auto& v : off[k]) ok.push_back(v.get<int64_t>());
      if (ok.size() != pk.size())
        return err("%s: offsets[%zu] has %zu entries, expected %zu", L, k, ok.size(), pk.size());
      int64_t run = 0;
      for (size_t i = 0; i < pk.size(); ++i) {
        if (ok[i] != run)
          return err("%s: offsets[%zu][%zu] = %lld, expected the running sum of primes %lld", L, k, i,
                     static_cast<long long>(ok[i]), static_cast<long long>(run));
        run += pk[i];
      }
      if (run != c.engram_rows[k])
        return err(
            "%s: primes of engram layer %d sum to %lld rows but config engram_num_embeddings[%zu] = %lld", L,
            c.engram_layers[k], static_cast<long long>(run), k, static_cast<long long>(c.engram_rows[k]));
      m.primes.push_back(std::move(pk));
      m.offsets.push_back(std::move(ok));
    }
  } catch (const json::exception& e) {
    return err("%s: malformed: %s", L, e.what());
  }
  return m;
}

}  // namespace strata::v41
