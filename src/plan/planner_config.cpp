// PlanModel from a Hugging Face config.json: tensor shapes as each architecture family lays them
// out, priced at assumed storage types (planner.h). Families: deepseek_v4 (compressed attention,
// hyper-connections), MLA models (deepseek_v2/v3: kv_lora_rank), and classic GQA MoE / dense
// models (qwen3_moe, qwen2_moe, mixtral, gpt_oss, llama, ...).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "plan/planner.h"

namespace strata {

namespace {

using json = nlohmann::json;
constexpr uint64_t kIoAlign = 4096;

struct Ctx {
  const json& j;
  const std::string& src;
  Result<int64_t> req(const char* key) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return err("%s: missing key \"%s\"", src.c_str(), key);
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      return err("%s: \"%s\" must be a non-negative integer", src.c_str(), key);
    return it->get<int64_t>();
  }
  Result<int64_t> opt(const char* key, int64_t dflt) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return dflt;
    return req(key);
  }
};

// Accumulates tensors by class at a storage type; a row of n values takes whole blocks.
struct Acc {
  PlanModel* m;
  void add(PlanClass c, GgmlType t, int64_t n0, int64_t rows = 1) {
    const TypeInfo& ti = type_info(t);
    const int64_t blocks = (n0 + ti.block_size - 1) / ti.block_size;
    m->class_bytes[c] += static_cast<uint64_t>(blocks) * ti.type_size * static_cast<uint64_t>(rows);
    m->class_params[c] += static_cast<uint64_t>(n0) * static_cast<uint64_t>(rows);
  }
};

uint64_t matrix_bytes(GgmlType t, int64_t n0, int64_t rows) {
  const TypeInfo& ti = type_info(t);
  return static_cast<uint64_t>((n0 + ti.block_size - 1) / ti.block_size) * ti.type_size *
         static_cast<uint64_t>(rows);
}

// Routed experts of one layer: E x (gate [d -> F], up [d -> F], down [F -> d]); sets the slot size
// (each part's cover rounded to 4 KiB, plus one page when an unaligned start straddles).
void add_experts(Acc& acc, GgmlType t, int64_t d, int64_t F, int64_t E) {
  const uint64_t gate = matrix_bytes(t, d, F), down = matrix_bytes(t, F, d);
  acc.add(plan_class_routed, t, d, 2 * F * E);
  acc.add(plan_class_routed, t, F, d * E);
  PlanModel& m = *acc.m;
  m.expert_bytes = std::max(m.expert_bytes, 2 * gate + down);
  auto cover = [](uint64_t b) {
    return (b + kIoAlign - 1) / kIoAlign * kIoAlign + (b % kIoAlign ? kIoAlign : 0);
  };
  m.slot_bytes = std::max(m.slot_bytes, 2 * cover(gate) + cover(down));
  ++m.n_moe_layers;
}

// One DeepSeek-V4 / V4.1 layer's parts outside the compressor, indexer and FFN: the two
// hyper-connection mixers (before attention and before the FFN), the attn / ffn / q / kv norms,
// the attention sinks and the projections q_a, q_b, kv, grouped wo_a and wo_b.
void add_ds_layer_attention(Acc& acc, GgmlType dt, int64_t d, int64_t hc, int64_t ql, int64_t hd,
                            int64_t n_head, int64_t og, int64_t ol) {
  const GgmlType f32 = GgmlType::f32;
  const int64_t n_mix = (2 + hc) * hc;
  for (int site = 0; site < 2; ++site) {
    acc.add(plan_class_norms_router, f32, hc * d, n_mix);
    acc.add(plan_class_norms_router, f32, n_mix + 3);
  }
  acc.add(plan_class_norms_router, f32, 2 * d + ql + hd);
  acc.add(plan_class_attention, f32, n_head);
  acc.add(plan_class_attention, dt, d, ql);
  acc.add(plan_class_attention, dt, ql, n_head * hd);
  acc.add(plan_class_attention, dt, d, hd);
  acc.add(plan_class_attention, dt, n_head * hd / og, og * ol);
  acc.add(plan_class_attention, dt, og * ol, d);
}

Status deepseek_v4(const Ctx& c, const PlanTypes& ty, PlanModel& m) {
  Acc acc{&m};
  const GgmlType dt = ty.dense, f32 = GgmlType::f32;
  STRATA_ASSIGN(int64_t hd, c.req("head_dim"));
  STRATA_ASSIGN(int64_t ql, c.req("q_lora_rank"));
  STRATA_ASSIGN(int64_t og, c.req("o_groups"));
  STRATA_ASSIGN(int64_t ol, c.req("o_lora_rank"));
  STRATA_ASSIGN(int64_t ih, c.req("index_n_heads"));
  STRATA_ASSIGN(int64_t ihd, c.req("index_head_dim"));
  STRATA_ASSIGN(int64_t itopk, c.opt("index_topk", 0));
  STRATA_ASSIGN(int64_t hc, c.opt("hc_mult", 4));
  STRATA_ASSIGN(int64_t n_shared, c.opt("n_shared_experts", 1));
  STRATA_ASSIGN(int64_t n_hash, c.opt("num_hash_layers", 0));
  if (og <= 0 || (m.n_head * hd) % og != 0)
    return err("%s: \"o_groups\" %lld must divide num_attention_heads x head_dim", c.src.c_str(),
               (long long)og);
  m.head_dim_k = m.head_dim_v = static_cast<int>(hd);
  m.hc = static_cast<int>(hc);
  m.n_indexer_head = static_cast<int>(ih);
  m.indexer_head_dim = static_cast<int>(ihd);
  m.indexer_top_k = static_cast<int>(itopk);
  m.n_ff_shexp = static_cast<int>(m.n_ff_exp * std::max<int64_t>(1, n_shared));
  const int64_t d = m.n_embd, V = m.n_vocab, E = m.n_expert, F = m.n_ff_exp, Fs = m.n_ff_shexp;
  const int64_t hcd = hc * d;
  acc.add(plan_class_embed_output, dt, d, V);
  acc.add(plan_class_embed_output, dt, d, V);
  acc.add(plan_class_norms_router, f32, d);
  acc.add(plan_class_norms_router, f32, hcd, hc);
  acc.add(plan_class_norms_router, f32, hc + 1);
  const auto& ratios = c.j["compress_ratios"];
  for (int il = 0; il < m.n_layer; ++il) {
    add_ds_layer_attention(acc, dt, d, hc, ql, hd, m.n_head, og, ol);
    const int r =
        il < static_cast<int>(ratios.size()) && ratios[il].is_number_integer() ? ratios[il].get<int>() : 0;
    if (r != 0) {
      const int64_t cw = (r == 4 ? 2 : 1) * hd;
      acc.add(plan_class_attention, dt, d, 2 * cw);
      acc.add(plan_class_attention, f32, cw * r + hd);
    }
    if (r == 4) {
      acc.add(plan_class_attention, dt, d, ih);
      acc.add(plan_class_attention, dt, ql, ih * ihd);
      acc.add(plan_class_attention, dt, d, 4 * ihd);
      acc.add(plan_class_attention, f32, 2 * ihd * 4 + ihd);
    }
    acc.add(plan_class_norms_router, f32, d, E);
    if (il < n_hash)
      acc.add(plan_class_norms_router, GgmlType::i32, m.n_expert_used, V);
    else
      acc.add(plan_class_norms_router, f32, E);
    add_experts(acc, ty.expert, d, F, E);
    acc.add(plan_class_shared, dt, d, 2 * Fs);
    acc.add(plan_class_shared, dt, Fs, d);
  }
  return {};
}

// The first of `keys` present (ModelArgs name, then the Hugging Face one).
Result<int64_t> any_of(const Ctx& c, std::initializer_list<const char*> keys, bool required,
                       int64_t dflt = 0) {
  for (const char* k : keys)
    if (c.j.contains(k) && !c.j[k].is_null()) return c.req(k);
  if (required) return c.req(*keys.begin());
  return dflt;
}

// DeepSeek-V4.1 from its checkpoint config.json (ModelArgs names; fixtures-v41 README shapes):
// CSA2 attention (compressors on KV sources only, indexers on index sources), hyper-connection
// mixers, noaux_tc MoE, and Engram layers (projections dense; the tables apart, FP8 + UE8M0).
Status deepseek_v41(const Ctx& c, const PlanTypes& ty, PlanModel& m) {
  Acc acc{&m};
  const GgmlType dt = ty.dense, f32 = GgmlType::f32;
  STRATA_ASSIGN(int64_t hd, c.req("head_dim"));
  STRATA_ASSIGN(int64_t ql, c.req("q_lora_rank"));
  STRATA_ASSIGN(int64_t og, c.req("o_groups"));
  STRATA_ASSIGN(int64_t ol, c.req("o_lora_rank"));
  STRATA_ASSIGN(int64_t ih, any_of(c, {"index_n_heads"}, false));
  STRATA_ASSIGN(int64_t itopk, any_of(c, {"index_topk"}, false));
  STRATA_ASSIGN(int64_t hc, any_of(c, {"hc_mult"}, false, 4));
  STRATA_ASSIGN(int64_t n_shared, any_of(c, {"n_shared_experts"}, false, 1));
  if (og <= 0 || (m.n_head * hd) % og != 0)
    return err("%s: \"o_groups\" %lld must divide n_heads x head_dim", c.src.c_str(), (long long)og);
  STRATA_ASSIGN(m.kv, kv_spec_from_v41_config(c.j.dump(), c.src));
  const KvModelSpec& k = m.kv;
  const int64_t ihd = k.indexer_head_dim;
  m.head_dim_k = m.head_dim_v = static_cast<int>(hd);
  m.n_head_kv = 1;
  m.hc = static_cast<int>(hc);
  m.n_indexer_head = static_cast<int>(ih);
  m.indexer_head_dim = static_cast<int>(ihd);
  m.indexer_top_k = static_cast<int>(itopk);
  m.n_ff_shexp = static_cast<int>(m.n_ff_exp * std::max<int64_t>(1, n_shared));
  const int64_t d = m.n_embd, V = m.n_vocab, E = m.n_expert, F = m.n_ff_exp, Fs = m.n_ff_shexp;
  acc.add(plan_class_embed_output, dt, d, V);
  acc.add(plan_class_embed_output, dt, d, V);
  acc.add(plan_class_norms_router, f32, d);
  std::vector<int> engram_of(static_cast<size_t>(m.n_layer), -1);
  for (size_t e = 0; e < k.engram_layers.size(); ++e)
    engram_of[static_cast<size_t>(k.engram_layers[e])] = static_cast<int>(e);
  for (int il = 0; il < m.n_layer; ++il) {
    add_ds_layer_attention(acc, dt, d, hc, ql, hd, m.n_head, og, ol);
    const int r = k.compress_ratios[static_cast<size_t>(il)];
    const KvLayerMode mode = k.layer_mode[static_cast<size_t>(il)];
    if (mode == KvLayerMode::full) {  // compressor: wkv (+ wgate for ratio 2, both F32), norm
      acc.add(plan_class_attention, r > 1 ? f32 : dt, d, hd);
      if (r > 1) acc.add(plan_class_attention, f32, d, hd);
      acc.add(plan_class_attention, f32, hd);
    }
    if (mode == KvLayerMode::full || mode == KvLayerMode::reindex) {
      const bool idx = k.layer_index_keys[static_cast<size_t>(il)] || mode == KvLayerMode::reindex;
      if (idx) {
        acc.add(plan_class_attention, dt, ql, ih * ihd);
        acc.add(plan_class_attention, dt, d, ih);
      }
      if (k.layer_index_keys[static_cast<size_t>(il)]) {
        acc.add(plan_class_attention, dt, hd, ihd);
        acc.add(plan_class_attention, f32, ihd);
      }
    }
    acc.add(plan_class_norms_router, f32, d, E);
    acc.add(plan_class_norms_router, f32, E);
    add_experts(acc, ty.expert, d, F, E);
    acc.add(plan_class_shared, dt, d, 2 * Fs);
    acc.add(plan_class_shared, dt, Fs, d);
    const int e = engram_of[static_cast<size_t>(il)];
    if (e >= 0) {
      acc.add(plan_class_engram_proj, dt, int64_t{k.engram_cols} * k.engram_head_dim, d * (hc + 1));
      acc.add(plan_class_engram_proj, f32, d, 2 * hc);
    }
  }
  m.engram_tables = static_cast<int>(k.engram_layers.size());
  m.engram_cols = k.engram_cols;
  m.engram_row_bytes = static_cast<uint64_t>(k.engram_head_dim + k.engram_head_dim / 32);
  for (int64_t rows : k.engram_rows) {
    m.engram_rows += rows;
    m.engram_table_bytes += static_cast<uint64_t>(rows) * m.engram_row_bytes;
  }
  return {};
}

Status mla_family(const Ctx& c, const PlanTypes& ty, PlanModel& m) {
  Acc acc{&m};
  const GgmlType dt = ty.dense, f32 = GgmlType::f32;
  STRATA_ASSIGN(int64_t ql, c.opt("q_lora_rank", 0));
  STRATA_ASSIGN(int64_t kvl, c.req("kv_lora_rank"));
  STRATA_ASSIGN(int64_t nope, c.req("qk_nope_head_dim"));
  STRATA_ASSIGN(int64_t rope, c.opt("qk_rope_head_dim", 64));
  STRATA_ASSIGN(int64_t vh, c.req("v_head_dim"));
  STRATA_ASSIGN(int64_t n_shared, c.opt("n_shared_experts", 0));
  STRATA_ASSIGN(int64_t first_dense, c.opt("first_k_dense_replace", 0));
  STRATA_ASSIGN(int64_t freq, c.opt("moe_layer_freq", 1));
  m.head_dim_k = static_cast<int>(nope + rope);
  m.head_dim_v = static_cast<int>(vh);
  m.n_ff_shexp = static_cast<int>(n_shared * m.n_ff_exp);
  const int64_t d = m.n_embd, V = m.n_vocab, nh = m.n_head;
  acc.add(plan_class_embed_output, dt, d, V);
  acc.add(plan_class_embed_output, dt, d, V);
  acc.add(plan_class_norms_router, f32, d);
  for (int il = 0; il < m.n_layer; ++il) {
    acc.add(plan_class_norms_router, f32, 2 * d + ql + kvl);
    if (ql > 0) {
      acc.add(plan_class_attention, dt, d, ql);
      acc.add(plan_class_attention, dt, ql, nh * (nope + rope));
    } else {
      acc.add(plan_class_attention, dt, d, nh * (nope + rope));
    }
    acc.add(plan_class_attention, dt, d, kvl + rope);
    acc.add(plan_class_attention, dt, kvl, nh * (nope + vh));
    acc.add(plan_class_attention, dt, nh * vh, d);
    const bool moe = m.n_expert > 0 && il >= first_dense && (freq <= 1 || il % freq == 0);
    if (!moe) {
      acc.add(plan_class_dense_ffn, dt, d, 2 * int64_t{m.n_ff});
      acc.add(plan_class_dense_ffn, dt, m.n_ff, d);
      continue;
    }
    acc.add(plan_class_norms_router, f32, d, m.n_expert);
    acc.add(plan_class_norms_router, f32, m.n_expert);
    add_experts(acc, ty.expert, d, m.n_ff_exp, m.n_expert);
    if (m.n_ff_shexp > 0) {
      acc.add(plan_class_shared, dt, d, 2 * int64_t{m.n_ff_shexp});
      acc.add(plan_class_shared, dt, m.n_ff_shexp, d);
    }
  }
  return {};
}

Status gqa_family(const Ctx& c, const PlanTypes& ty, PlanModel& m) {
  Acc acc{&m};
  const GgmlType dt = ty.dense, f32 = GgmlType::f32;
  STRATA_ASSIGN(int64_t hd, c.opt("head_dim", m.n_head ? m.n_embd / m.n_head : 0));
  if (hd <= 0) return err("%s: cannot derive the head size (head_dim / hidden_size)", c.src.c_str());
  STRATA_ASSIGN(int64_t shared, c.opt("shared_expert_intermediate_size", 0));
  STRATA_ASSIGN(int64_t sparse_step, c.opt("decoder_sparse_step", 1));
  int64_t tie = 0;
  if (c.j.contains("tie_word_embeddings") && c.j["tie_word_embeddings"].is_boolean())
    tie = c.j["tie_word_embeddings"].get<bool>() ? 1 : 0;
  std::vector<int64_t> mlp_only;
  if (c.j.contains("mlp_only_layers") && c.j["mlp_only_layers"].is_array())
    for (const json& x : c.j["mlp_only_layers"])
      if (x.is_number_integer()) mlp_only.push_back(x.get<int64_t>());
  m.head_dim_k = m.head_dim_v = static_cast<int>(hd);
  m.n_ff_shexp = static_cast<int>(shared);
  const bool qk_norm = m.arch == "qwen3_moe" || m.arch == "qwen3";
  const bool qkv_bias = m.arch == "qwen2_moe" || m.arch == "qwen2" || m.arch == "gpt_oss";
  const int64_t d = m.n_embd, V = m.n_vocab, nh = m.n_head, nkv = m.n_head_kv;
  acc.add(plan_class_embed_output, dt, d, V);
  if (!tie) acc.add(plan_class_embed_output, dt, d, V);
  acc.add(plan_class_norms_router, f32, d);
  for (int il = 0; il < m.n_layer; ++il) {
    acc.add(plan_class_norms_router, f32, 2 * d + (qk_norm ? 2 * hd : 0));
    acc.add(plan_class_attention, dt, d, (nh + 2 * nkv) * hd);
    acc.add(plan_class_attention, dt, nh * hd, d);
    if (qkv_bias) acc.add(plan_class_attention, f32, (nh + 2 * nkv) * hd);
    if (m.arch == "gpt_oss") acc.add(plan_class_attention, f32, nh);  // sinks
    const bool moe = m.n_expert > 0 && std::find(mlp_only.begin(), mlp_only.end(), il) == mlp_only.end() &&
                     (sparse_step <= 1 || (il + 1) % sparse_step == 0);
    if (!moe) {
      acc.add(plan_class_dense_ffn, dt, d, 2 * int64_t{m.n_ff});
      acc.add(plan_class_dense_ffn, dt, m.n_ff, d);
      continue;
    }
    acc.add(plan_class_norms_router, f32, d, m.n_expert);
    add_experts(acc, ty.expert, d, m.n_ff_exp, m.n_expert);
    if (shared > 0) {
      acc.add(plan_class_shared, dt, d, 2 * shared + 1);  // gate, up, and the shared-expert gate row
      acc.add(plan_class_shared, dt, shared, d);
    }
  }
  return {};
}

Result<PlanModel> plan_model_from_v41(const Ctx& c, const PlanTypes& types, PlanModel& m) {
  m.arch = "deepseek_v41";
  PlanTypes ty = types;
  if (ty.expert == GgmlType::count) ty.expert = GgmlType::mxfp4;
  m.types = std::string("assumed: routed experts ") + type_name(ty.expert) + ", other matrices " +
            type_name(ty.dense) + ", norms/routers/mixers f32; Engram tables FP8 + UE8M0";
  STRATA_ASSIGN(int64_t n_layer, any_of(c, {"n_layers", "num_hidden_layers"}, true));
  STRATA_ASSIGN(int64_t d, any_of(c, {"dim", "hidden_size"}, true));
  STRATA_ASSIGN(int64_t V, any_of(c, {"vocab_size"}, true));
  STRATA_ASSIGN(int64_t nh, any_of(c, {"n_heads", "num_attention_heads"}, true));
  STRATA_ASSIGN(int64_t E, any_of(c, {"n_routed_experts"}, true));
  STRATA_ASSIGN(int64_t k, any_of(c, {"n_activated_experts", "num_experts_per_tok"}, true));
  STRATA_ASSIGN(int64_t F, any_of(c, {"moe_inter_dim", "moe_intermediate_size"}, true));
  if (n_layer <= 0 || n_layer > 100000 || d <= 0 || d > (1 << 20) || V <= 0 || nh <= 0)
    return err("%s: n_layers / dim / vocab_size / n_heads must be positive", c.src.c_str());
  if (E <= 0 || F <= 0 || k <= 0 || k > E)
    return err(
        "%s: n_routed_experts %lld, n_activated_experts %lld, moe_inter_dim %lld: need 0 < k <= experts and "
        "a positive width",
        c.src.c_str(), (long long)E, (long long)k, (long long)F);
  for (GgmlType t : {ty.expert, ty.dense}) {
    const int64_t bs = type_info(t).block_size;
    if (d % bs != 0 || F % bs != 0)
      return err("%s: dim %lld / moe_inter_dim %lld not a multiple of %s's block of %lld", c.src.c_str(),
                 (long long)d, (long long)F, type_name(t), (long long)bs);
  }
  m.n_layer = static_cast<int>(n_layer);
  m.n_embd = static_cast<int>(d);
  m.n_vocab = static_cast<int>(V);
  m.n_head = static_cast<int>(nh);
  m.n_expert = static_cast<int>(E);
  m.n_expert_used = static_cast<int>(k);
  m.n_ff_exp = static_cast<int>(F);
  STRATA_TRY(deepseek_v41(c, ty, m));
  return m;
}

}  // namespace

Result<PlanModel> plan_model_from_hf_config_text(const std::string& text, const std::string& source,
                                                 const PlanTypes& types) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return err("%s: not a JSON object (config.json expected)", source.c_str());
  if (j.contains("text_config") && j["text_config"].is_object() && !j.contains("num_hidden_layers"))
    j = j["text_config"];
  const Ctx c{j, source};
  PlanModel m;
  m.source = source;
  m.from_config = true;
  m.arch = j.value("model_type", std::string("unknown"));
  if (kv_is_v41_config(j)) return plan_model_from_v41(c, types, m);
  const bool v4 = j.contains("compress_ratios");
  PlanTypes ty = types;
  if (ty.expert == GgmlType::count) ty.expert = v4 ? GgmlType::mxfp4 : GgmlType::q8_0;
  m.types = std::string("assumed: routed experts ") + type_name(ty.expert) + ", other matrices " +
            type_name(ty.dense) + ", norms/routers f32";
  STRATA_ASSIGN(int64_t n_layer, c.req("num_hidden_layers"));
  STRATA_ASSIGN(int64_t d, c.req("hidden_size"));
  STRATA_ASSIGN(int64_t V, c.req("vocab_size"));
  STRATA_ASSIGN(int64_t nh, c.req("num_attention_heads"));
  STRATA_ASSIGN(int64_t nkv, c.opt("num_key_value_heads", nh));
  if (n_layer <= 0 || n_layer > 100000 || d <= 0 || d > (1 << 20) || V <= 0 || nh <= 0)
    return err("%s: num_hidden_layers / hidden_size / vocab_size / num_attention_heads must be positive",
               source.c_str());
  // Routed experts: the key differs per family.
  int64_t E = 0;
  for (const char* k : {"n_routed_experts", "num_experts", "num_local_experts"}) {
    STRATA_ASSIGN(E, c.opt(k, 0));
    if (E > 0) break;
  }
  STRATA_ASSIGN(int64_t k, c.opt("num_experts_per_tok", E > 0 ? 1 : 0));
  STRATA_ASSIGN(int64_t n_ff, c.opt("intermediate_size", 0));
  STRATA_ASSIGN(int64_t F, c.opt("moe_intermediate_size", n_ff));
  if (E > 0 && (F <= 0 || k <= 0 || k > E))
    return err(
        "%s: %lld experts need moe_intermediate_size/intermediate_size > 0 and 0 < num_experts_per_tok <= "
        "experts",
        source.c_str(), (long long)E);
  m.n_layer = static_cast<int>(n_layer);
  m.n_embd = static_cast<int>(d);
  m.n_vocab = static_cast<int>(V);
  m.n_head = static_cast<int>(nh);
  m.n_head_kv = static_cast<int>(nkv);
  m.n_expert = static_cast<int>(E);
  m.n_expert_used = static_cast<int>(k);
  m.n_ff_exp = static_cast<int>(E > 0 ? F : 0);
  m.n_ff = static_cast<int>(n_ff);
  for (GgmlType t : {ty.expert, ty.dense}) {
    const int64_t bs = type_info(t).block_size;
    if (d % bs != 0)
      return err("%s: hidden_size %lld is not a multiple of %s's block of %lld", source.c_str(), (long long)d,
                 type_name(t), (long long)bs);
  }
  if (v4) {
    STRATA_TRY(deepseek_v4(c, ty, m));
  } else if (j.contains("kv_lora_rank") && !j["kv_lora_rank"].is_null()) {
    STRATA_TRY(mla_family(c, ty, m));
  } else {
    STRATA_TRY(gqa_family(c, ty, m));
  }
  STRATA_ASSIGN(m.kv, kv_spec_from_hf_config_text(text, source));
  return m;
}

Result<PlanModel> plan_model_from_hf_config(const std::string& path, const PlanTypes& types) {
  std::ifstream in(path);
  if (!in) return err("cannot open %s", path.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  return plan_model_from_hf_config_text(ss.str(), path, types);
}

}  // namespace strata
