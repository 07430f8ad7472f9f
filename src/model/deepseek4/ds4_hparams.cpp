#include "model/deepseek4/ds4_hparams.h"

#include <string>

namespace strata::ds4 {

namespace {

Result<int> req_int(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  if (!f.find(key)) return err("metadata key '%s': missing", key.c_str());
  STRATA_ASSIGN(int64_t v, f.get_int(key));
  if (v < lo || v > hi)
    return err("metadata key '%s': value %lld out of range [%lld, %lld]", key.c_str(), (long long)v,
               (long long)lo, (long long)hi);
  return static_cast<int>(v);
}

Result<float> req_float(const GgufFile& f, const std::string& key) {
  if (!f.find(key)) return err("metadata key '%s': missing", key.c_str());
  STRATA_ASSIGN(double v, f.get_float(key));
  return static_cast<float>(v);
}

// A per-layer float: array of >= n entries or one scalar (llama.cpp get_key_or_arr).
Result<std::vector<float>> per_layer_float(const GgufFile& f, const std::string& key, int n) {
  const GgufValue* v = f.find(key);
  if (!v) return err("metadata key '%s': missing", key.c_str());
  if (v->as_array()) {
    STRATA_ASSIGN(auto arr, f.get_float_array(key));
    if (static_cast<int>(arr.size()) < n)
      return err("metadata key '%s': %zu entries, expected >= %d (block_count)", key.c_str(), arr.size(), n);
    arr.resize(static_cast<size_t>(n));
    return arr;
  }
  STRATA_ASSIGN(double x, f.get_float(key));
  return std::vector<float>(static_cast<size_t>(n), static_cast<float>(x));
}

}  // namespace

RopeParams Ds4Params::rope_for(int il) const {
  if (ratios[il] == 0) return rope_plain(n_rot, rope_base);
  return rope_yarn(n_rot, comp_rope_base, yarn_factor, yarn_orig, beta_fast, beta_slow);
}

Result<Ds4Params> ds4_params_read(const GgufFile& f) {
  Ds4Params p;
  const std::string a = "deepseek4.";
  STRATA_ASSIGN(std::string arch, f.get_string("general.architecture"));
  if (arch != "deepseek4") return err("general.architecture = '%s', expected 'deepseek4'", arch.c_str());
  constexpr int64_t kDim = 1 << 20;
  STRATA_ASSIGN(p.n_layer, req_int(f, a + "block_count", 1, 4096));
  STRATA_ASSIGN(int64_t nextn, f.get_int_or(a + "nextn_predict_layers", 0));
  if (nextn != 0)
    return err("metadata key '%snextn_predict_layers' = %lld: MTP GGUFs are not supported", a.c_str(),
               (long long)nextn);
  STRATA_ASSIGN(p.n_embd, req_int(f, a + "embedding_length", 1, kDim));
  STRATA_ASSIGN(p.n_head, req_int(f, a + "attention.head_count", 1, 4096));
  STRATA_ASSIGN(int n_head_kv, req_int(f, a + "attention.head_count_kv", 1, 4096));
  if (n_head_kv != 1)
    return err("metadata key '%sattention.head_count_kv' = %d, expected 1 (shared K=V)", a.c_str(),
               n_head_kv);
  STRATA_ASSIGN(p.head_dim, req_int(f, a + "attention.key_length", 1, 65536));
  STRATA_ASSIGN(int vlen, req_int(f, a + "attention.value_length", 1, 65536));
  if (vlen != p.head_dim)
    return err("metadata key '%sattention.value_length' = %d, expected key_length %d (K = V)", a.c_str(),
               vlen, p.head_dim);
  STRATA_ASSIGN(p.n_rot, req_int(f, a + "rope.dimension_count", 2, 65536));
  if (p.n_rot % 2 || p.n_rot > p.head_dim)
    return err("metadata key '%srope.dimension_count' = %d: must be even and <= key_length %d", a.c_str(),
               p.n_rot, p.head_dim);
  STRATA_ASSIGN(p.n_ctx_train, f.get_int_or(a + "context_length", 4096));
  STRATA_ASSIGN(p.eps, req_float(f, a + "attention.layer_norm_rms_epsilon"));
  STRATA_ASSIGN(double rb, f.get_float_or(a + "rope.freq_base", 10000.0));
  p.rope_base = static_cast<float>(rb);
  STRATA_ASSIGN(p.comp_rope_base, req_float(f, a + "attention.compress_rope_freq_base"));
  STRATA_ASSIGN(std::string scaling, f.get_string_or(a + "rope.scaling.type", "none"));
  if (scaling == "yarn") {
    STRATA_ASSIGN(p.yarn_factor, req_float(f, a + "rope.scaling.factor"));
    STRATA_ASSIGN(p.yarn_orig, req_int(f, a + "rope.scaling.original_context_length", 1, int64_t{1} << 30));
    STRATA_ASSIGN(double bf, f.get_float_or(a + "rope.scaling.yarn_beta_fast", 32.0));
    STRATA_ASSIGN(double bs, f.get_float_or(a + "rope.scaling.yarn_beta_slow", 1.0));
    p.beta_fast = static_cast<float>(bf);
    p.beta_slow = static_cast<float>(bs);
    if (!(p.yarn_factor >= 1.0f)) return err("metadata key '%srope.scaling.factor': must be >= 1", a.c_str());
  } else if (scaling != "none") {
    return err("metadata key '%srope.scaling.type' = '%s': deepseek4 expects yarn", a.c_str(),
               scaling.c_str());
  }
  STRATA_ASSIGN(p.q_lora, req_int(f, a + "attention.q_lora_rank", 1, kDim));
  STRATA_ASSIGN(p.n_swa, req_int(f, a + "attention.sliding_window", 1, int64_t{1} << 30));
  STRATA_ASSIGN(p.o_groups, req_int(f, a + "attention.output_group_count", 1, 4096));
  STRATA_ASSIGN(p.o_lora, req_int(f, a + "attention.output_lora_rank", 1, kDim));
  if (p.n_head % p.o_groups)
    return err("metadata key '%sattention.output_group_count' = %d does not divide head_count %d", a.c_str(),
               p.o_groups, p.n_head);
  const std::string rk = a + "attention.compress_ratios";
  if (!f.find(rk)) return err("metadata key '%s': missing", rk.c_str());
  STRATA_ASSIGN(auto ratios, f.get_int_array(rk));
  if (static_cast<int>(ratios.size()) < p.n_layer)
    return err("metadata key '%s': %zu entries, expected >= %d (block_count)", rk.c_str(), ratios.size(),
               p.n_layer);
  for (int il = 0; il < p.n_layer; ++il) {
    const int64_t r = ratios[il];
    if (r != 0 && r != 4 && r != 128)
      return err("metadata key '%s'[%d] = %lld: only 0, 4 and 128 are supported", rk.c_str(), il,
                 (long long)r);
    p.ratios.push_back(static_cast<int>(r));
  }
  STRATA_ASSIGN(p.ih, req_int(f, a + "attention.indexer.head_count", 1, 4096));
  STRATA_ASSIGN(p.ihd, req_int(f, a + "attention.indexer.key_length", 1, 65536));
  STRATA_ASSIGN(p.itopk, req_int(f, a + "attention.indexer.top_k", 1, int64_t{1} << 30));
  if (p.ihd < p.n_rot)
    return err("metadata key '%sattention.indexer.key_length' = %d < rope.dimension_count %d", a.c_str(),
               p.ihd, p.n_rot);
  STRATA_ASSIGN(p.n_expert, req_int(f, a + "expert_count", 1, 65536));
  STRATA_ASSIGN(p.n_used, req_int(f, a + "expert_used_count", 1, p.n_expert));
  {  // scalar or per-layer array (the converter may write either); strata needs one width
    const std::string k = a + "expert_feed_forward_length";
    STRATA_ASSIGN(auto ff, per_layer_float(f, k, p.n_layer));
    for (int il = 1; il < p.n_layer; ++il)
      if (ff[il] != ff[0])
        return err("metadata key '%s': per-layer widths differ (layer 0: %g, layer %d: %g); not supported",
                   k.c_str(), ff[0], il, ff[il]);
    if (!(ff[0] >= 1 && ff[0] <= kDim))
      return err("metadata key '%s': value %g out of range", k.c_str(), ff[0]);
    p.n_ff_exp = static_cast<int>(ff[0]);
  }
  STRATA_ASSIGN(p.n_shared, req_int(f, a + "expert_shared_count", 0, 64));
  STRATA_ASSIGN(p.w_scale, req_float(f, a + "expert_weights_scale"));
  STRATA_ASSIGN(p.w_norm, f.get_bool_or(a + "expert_weights_norm", false));
  STRATA_ASSIGN(int gating, req_int(f, a + "expert_gating_func", 0, 16));
  if (gating != 4)
    return err("metadata key '%sexpert_gating_func' = %d, expected 4 (sqrt-softplus)", a.c_str(), gating);
  STRATA_ASSIGN(p.clamp_exp, per_layer_float(f, a + "swiglu_clamp_exp", p.n_layer));
  if (f.find(a + "swiglu_clamp_shexp")) {
    STRATA_ASSIGN(p.clamp_shexp, per_layer_float(f, a + "swiglu_clamp_shexp", p.n_layer));
  } else {
    p.clamp_shexp = p.clamp_exp;
  }
  STRATA_ASSIGN(p.hc, req_int(f, a + "hyper_connection.count", 1, 64));
  if (p.hc != 4) return err("metadata key '%shyper_connection.count' = %d, expected 4", a.c_str(), p.hc);
  STRATA_ASSIGN(p.hc_iters, req_int(f, a + "hyper_connection.sinkhorn_iterations", 1, 1000));
  STRATA_ASSIGN(p.hc_eps, req_float(f, a + "hyper_connection.epsilon"));
  STRATA_ASSIGN(p.n_hash, req_int(f, a + "hash_layer_count", 0, p.n_layer));
  return p;
}

}  // namespace strata::ds4
