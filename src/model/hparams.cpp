#include "model/hparams.h"

#include <algorithm>
#include <cmath>

namespace strata {

const char* attn_kind_name(AttnKind k) {
  switch (k) {
    case AttnKind::attn_kind_full:
      return "full";
    case AttnKind::attn_kind_sliding:
      return "sliding";
    case AttnKind::attn_kind_csa:
      return "csa";
    case AttnKind::attn_kind_hca:
      return "hca";
  }
  return "?";
}

namespace {

// A required positive integer key.
Result<int> req_int(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  if (!f.find(key)) return err("metadata key '%s': missing", key.c_str());
  STRATA_ASSIGN(int64_t v, f.get_int(key));
  if (v < lo || v > hi)
    return err("metadata key '%s': value %lld out of range [%lld, %lld]", key.c_str(),
               static_cast<long long>(v), static_cast<long long>(lo), static_cast<long long>(hi));
  return static_cast<int>(v);
}

Result<int> opt_int(const GgufFile& f, const std::string& key, int64_t dflt, int64_t lo, int64_t hi) {
  if (!f.find(key)) return static_cast<int>(dflt);
  return req_int(f, key, lo, hi);
}

Result<float> opt_float(const GgufFile& f, const std::string& key, double dflt) {
  STRATA_ASSIGN(double v, f.get_float_or(key, dflt));
  if (!std::isfinite(v)) return err("metadata key '%s': not a finite number", key.c_str());
  return static_cast<float>(v);
}

constexpr int64_t kMaxDim = 1 << 20;

}  // namespace

Result<HParams> hparams_read_common(const GgufFile& f) {
  HParams hp;
  STRATA_ASSIGN(hp.arch, f.get_string("general.architecture"));
  const std::string a = hp.arch + ".";
  STRATA_ASSIGN(hp.n_layer, req_int(f, a + "block_count", 1, 4096));
  STRATA_ASSIGN(hp.n_embd, req_int(f, a + "embedding_length", 1, kMaxDim));
  STRATA_ASSIGN(hp.n_head, req_int(f, a + "attention.head_count", 1, 4096));
  // head_count_kv may be one number or one per layer (hybrid models); n_head_kv = the largest.
  std::vector<int64_t> kv_per_layer;
  if (f.get_array(a + "attention.head_count_kv")) {
    STRATA_ASSIGN(kv_per_layer, f.get_int_array(a + "attention.head_count_kv"));
    if (static_cast<int>(kv_per_layer.size()) != hp.n_layer)
      return err("metadata key '%sattention.head_count_kv': %zu values for %d layers", a.c_str(),
                 kv_per_layer.size(), hp.n_layer);
    hp.n_head_kv = 1;
    for (int64_t v : kv_per_layer) {
      if (v < 1 || v > 4096)
        return err("metadata key '%sattention.head_count_kv': value %lld out of range", a.c_str(),
                   static_cast<long long>(v));
      hp.n_head_kv = std::max(hp.n_head_kv, static_cast<int>(v));
    }
  } else {
    STRATA_ASSIGN(hp.n_head_kv, opt_int(f, a + "attention.head_count_kv", hp.n_head, 1, 4096));
  }
  STRATA_ASSIGN(hp.head_dim_k, opt_int(f, a + "attention.key_length", hp.n_embd / hp.n_head, 1, 65536));
  STRATA_ASSIGN(hp.head_dim_v, opt_int(f, a + "attention.value_length", hp.head_dim_k, 1, 65536));
  STRATA_ASSIGN(hp.n_ctx_train, opt_int(f, a + "context_length", 4096, 1, int64_t{1} << 30));
  STRATA_ASSIGN(hp.n_vocab, opt_int(f, a + "vocab_size", 0, 0, int64_t{1} << 30));
  STRATA_ASSIGN(hp.rms_eps, opt_float(f, a + "attention.layer_norm_rms_epsilon", 1e-6));
  if (!(hp.rms_eps > 0.0f))
    return err("metadata key '%sattention.layer_norm_rms_epsilon': must be > 0", a.c_str());

  STRATA_ASSIGN(hp.rope.n_rot, opt_int(f, a + "rope.dimension_count", hp.head_dim_k, 2, 65536));
  STRATA_ASSIGN(hp.rope.freq_base, opt_float(f, a + "rope.freq_base", 10000.0));
  if (!(hp.rope.freq_base > 0.0f)) return err("metadata key '%srope.freq_base': must be > 0", a.c_str());
  STRATA_ASSIGN(std::string scaling, f.get_string_or(a + "rope.scaling.type", "none"));
  if (scaling == "yarn") {
    STRATA_ASSIGN(float factor, opt_float(f, a + "rope.scaling.factor", 1.0));
    if (!(factor >= 1.0f))
      return err("metadata key '%srope.scaling.factor': %g, expected >= 1", a.c_str(), factor);
    STRATA_ASSIGN(hp.rope.n_ctx_orig,
                  req_int(f, a + "rope.scaling.original_context_length", 1, int64_t{1} << 30));
    hp.rope.freq_scale = 1.0f / factor;
    hp.rope.ext_factor = 1.0f;
  } else if (scaling == "linear") {
    STRATA_ASSIGN(float factor, opt_float(f, a + "rope.scaling.factor", 1.0));
    if (!(factor > 0.0f)) return err("metadata key '%srope.scaling.factor': must be > 0", a.c_str());
    hp.rope.freq_scale = 1.0f / factor;
  } else if (scaling != "none") {
    return err("metadata key '%srope.scaling.type': unsupported value '%s'", a.c_str(), scaling.c_str());
  }

  STRATA_ASSIGN(hp.n_ff, opt_int(f, a + "feed_forward_length", 0, 0, kMaxDim));
  STRATA_ASSIGN(hp.n_expert, opt_int(f, a + "expert_count", 0, 0, 65536));
  STRATA_ASSIGN(hp.n_expert_used, opt_int(f, a + "expert_used_count", 0, 0, 65536));
  STRATA_ASSIGN(hp.n_ff_exp, opt_int(f, a + "expert_feed_forward_length", hp.n_ff, 0, kMaxDim));
  STRATA_ASSIGN(hp.n_ff_shexp, opt_int(f, a + "expert_shared_feed_forward_length", 0, 0, kMaxDim));
  STRATA_ASSIGN(hp.sliding_window, opt_int(f, a + "attention.sliding_window", 0, 0, int64_t{1} << 30));

  hp.layers.resize(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerParams& l = hp.layers[il];
    l.n_head = hp.n_head;
    l.n_head_kv = kv_per_layer.empty() ? hp.n_head_kv : static_cast<int>(kv_per_layer[il]);
    l.n_ff_exp = hp.n_ff_exp;
  }
  return hp;
}

Status hparams_validate(const HParams& hp) {
  const char* a = hp.arch.c_str();
  if (hp.n_head % hp.n_head_kv != 0)
    return err("%s: attention.head_count %d is not a multiple of head_count_kv %d", a, hp.n_head,
               hp.n_head_kv);
  if (hp.rope.n_rot % 2 != 0 || hp.rope.n_rot > hp.head_dim_k)
    return err("%s: rope.dimension_count %d must be even and <= key_length %d", a, hp.rope.n_rot,
               hp.head_dim_k);
  if (hp.n_expert > 0) {
    if (hp.n_expert_used < 1 || hp.n_expert_used > hp.n_expert)
      return err("%s: expert_used_count %d must be in [1, expert_count %d]", a, hp.n_expert_used,
                 hp.n_expert);
    if (hp.n_ff_exp < 1) return err("%s: expert_feed_forward_length missing or 0", a);
  }
  if (static_cast<int>(hp.layers.size()) != hp.n_layer) return err("%s: per-layer table size mismatch", a);
  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerParams& l = hp.layers[il];
    if (l.n_head_kv < 1 || l.n_head % l.n_head_kv != 0)
      return err("%s: layer %d: n_head %d not a multiple of n_head_kv %d", a, il, l.n_head, l.n_head_kv);
    if (l.attn_kind == AttnKind::attn_kind_sliding && l.window < 1)
      return err("%s: layer %d is sliding-window but attention.sliding_window is 0", a, il);
  }
  return {};
}

}  // namespace strata
