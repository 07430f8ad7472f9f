// PlanModel from a GGUF: exact bytes per tensor class, expert and slot sizes from the tensor table
// (planner.h).
#include <algorithm>
#include <cstring>

#include "format/tensor_names.h"
#include "plan/planner.h"

namespace strata {

namespace {

bool has(const std::string& s, const char* sub) {
  return s.find(sub) != std::string::npos;
}

PlanClass classify(const std::string& name) {
  if (name.rfind("token_embd", 0) == 0 || name == "output.weight") return plan_class_embed_output;
  if (is_routed_expert(name)) return plan_class_routed;
  if (has(name, "_shexp")) return plan_class_shared;
  if (has(name, "norm") || has(name, "ffn_gate_inp") || has(name, "exp_probs") || has(name, "tid2eid") ||
      has(name, "hc_"))
    return plan_class_norms_router;
  if (has(name, "attn") || has(name, "indexer")) return plan_class_attention;
  if (has(name, "ffn_gate") || has(name, "ffn_up") || has(name, "ffn_down")) return plan_class_dense_ffn;
  return plan_class_norms_router;
}

Result<int> meta_int(const GgufFile& f, const std::string& key, int64_t dflt) {
  const GgufValue* v = f.find(key);
  if (!v) return static_cast<int>(dflt);
  if (const GgufArray* a = v->as_array()) {  // per-layer arrays: the largest value
    int64_t best = 0;
    for (const GgufValue& x : a->items) {
      int64_t i = 0;
      if (!x.as_int(&i)) return err("metadata key '%s': not an integer array", key.c_str());
      best = std::max(best, i);
    }
    return static_cast<int>(best);
  }
  int64_t i = 0;
  if (!v->as_int(&i) || i < 0 || i > (int64_t{1} << 31) - 1)
    return err("metadata key '%s': expected a non-negative integer", key.c_str());
  return static_cast<int>(i);
}

}  // namespace

Result<PlanModel> plan_model_from_gguf(const GgufFile& f) {
  PlanModel m;
  m.source = f.path();
  m.types = "from the file";
  STRATA_ASSIGN(m.arch, f.get_string("general.architecture"));
  const std::string a = m.arch + ".";
  STRATA_ASSIGN(int n_all, meta_int(f, a + "block_count", 0));
  STRATA_ASSIGN(int nextn, meta_int(f, a + "nextn_predict_layers", 0));
  if (n_all <= nextn) return err("metadata key '%sblock_count' = %d: no main layers", a.c_str(), n_all);
  m.n_layer = n_all - nextn;
  STRATA_ASSIGN(m.n_embd, meta_int(f, a + "embedding_length", 0));
  if (m.n_embd <= 0) return err("metadata key '%sembedding_length': missing or zero", a.c_str());
  STRATA_ASSIGN(m.n_head, meta_int(f, a + "attention.head_count", 1));
  STRATA_ASSIGN(m.n_head_kv, meta_int(f, a + "attention.head_count_kv", m.n_head));
  STRATA_ASSIGN(m.head_dim_k, meta_int(f, a + "attention.key_length", m.n_head ? m.n_embd / m.n_head : 0));
  STRATA_ASSIGN(m.head_dim_v, meta_int(f, a + "attention.value_length", m.head_dim_k));
  STRATA_ASSIGN(m.n_expert, meta_int(f, a + "expert_count", 0));
  STRATA_ASSIGN(m.n_expert_used, meta_int(f, a + "expert_used_count", 0));
  STRATA_ASSIGN(m.n_ff, meta_int(f, a + "feed_forward_length", 0));
  // defaults as model/hparams.cpp reads them: expert width = feed_forward_length (Mixtral-style),
  // the shared expert's from its tensor (qwen2moe's binder does the same)
  STRATA_ASSIGN(m.n_ff_exp, meta_int(f, a + "expert_feed_forward_length", m.n_ff));
  const TensorView* gs = f.find_tensor(blk_name(0, "ffn_gate_shexp.weight"));
  STRATA_ASSIGN(m.n_ff_shexp,
                meta_int(f, a + "expert_shared_feed_forward_length", gs ? static_cast<int>(gs->ne[1]) : 0));
  if (m.arch == "deepseek4") {
    STRATA_ASSIGN(m.hc, meta_int(f, a + "hyper_connection.count", 4));
    STRATA_ASSIGN(m.n_indexer_head, meta_int(f, a + "attention.indexer.head_count", 0));
    STRATA_ASSIGN(m.indexer_head_dim, meta_int(f, a + "attention.indexer.key_length", 0));
    STRATA_ASSIGN(m.indexer_top_k, meta_int(f, a + "attention.indexer.top_k", 0));
    STRATA_ASSIGN(int n_shared, meta_int(f, a + "expert_shared_count", 1));
    m.n_ff_shexp = m.n_ff_exp * std::max(1, n_shared);
  }
  if (const TensorView* te = f.find_tensor("token_embd.weight")) m.n_vocab = static_cast<int>(te->ne[1]);

  // Per layer: routed bytes and each expert's slot (4 KiB covers of its part ranges).
  std::vector<uint64_t> layer_routed(static_cast<size_t>(n_all), 0);
  std::vector<std::vector<const TensorView*>> parts(static_cast<size_t>(n_all));
  for (const TensorView& t : f.tensors()) {
    const int blk = blk_index(t.name);
    if (blk >= m.n_layer) continue;  // nextn (MTP) layers do not run
    const PlanClass c = classify(t.name);
    m.class_bytes[c] += t.nbytes;
    m.class_params[c] += static_cast<uint64_t>(t.n_elements());
    if (c == plan_class_routed && blk >= 0) {
      layer_routed[blk] += t.nbytes;
      parts[blk].push_back(&t);
    }
  }
  const uint8_t* base = nullptr;  // file offsets from data pointers: the first tensor's
  for (const TensorView& t : f.tensors())
    if (t.data && (!base || static_cast<const uint8_t*>(t.data) < base))
      base = static_cast<const uint8_t*>(t.data);
  for (int l = 0; l < m.n_layer; ++l) {
    if (parts[l].empty()) continue;
    if (m.n_expert <= 0)
      return err("tensor '%s': routed experts but no '%sexpert_count'", parts[l][0]->name.c_str(), a.c_str());
    ++m.n_moe_layers;
    m.expert_bytes = std::max(m.expert_bytes, layer_routed[l] / static_cast<uint64_t>(m.n_expert));
    for (const TensorView* t : parts[l]) {
      if (t->ne[t->n_dims - 1] != m.n_expert)
        return err("tensor '%s': last dimension %lld, expected %d experts", t->name.c_str(),
                   (long long)t->ne[t->n_dims - 1], m.n_expert);
    }
    for (int e = 0; e < m.n_expert; ++e) {
      uint64_t slot = 0;
      for (const TensorView* t : parts[l]) {
        const size_t stride = t->nb[t->n_dims - 1];
        const uint64_t begin = static_cast<uint64_t>(f.data_offset()) +
                               static_cast<uint64_t>(static_cast<const uint8_t*>(t->data) - base) +
                               static_cast<uint64_t>(e) * stride;
        const uint64_t lo = io_align_down(begin), hi = io_align_up(begin + stride);
        slot += hi - lo;
      }
      m.slot_bytes = std::max(m.slot_bytes, slot);
    }
  }
  if (m.n_moe_layers > 0 && m.n_expert_used <= 0)
    return err("metadata key '%sexpert_used_count': missing or zero in a model with routed experts",
               a.c_str());
  STRATA_ASSIGN(m.kv, kv_spec_from_gguf(f));
  return m;
}

}  // namespace strata
