#include "quantize/type_policy.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <regex>
#include <string_view>

namespace strata {

class NameRegex {
 public:
  explicit NameRegex(const std::string& pattern) : re_(pattern) {}
  bool search(const std::string& name) const { return std::regex_search(name, re_); }

 private:
  std::regex re_;
};

bool TensorTypeRule::matches(const std::string& name) const {
  return regex && regex->search(name);
}

namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// Dims up to the last one above 1 (a [n, 1] tensor is 1-D), as ggml counts them.
int effective_dims(const int64_t ne[4]) {
  int n = 1;
  for (int i = 1; i < 4; ++i) {
    if (ne[i] > 1) n = i + 1;
  }
  return n;
}

// Names that are never converted although 2-D: small or precision-critical tensors.
constexpr std::string_view kKeepParts[] = {
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
};

bool convertible(const std::string& name, const int64_t ne[4]) {
  if (effective_dims(ne) < 2 || !ends_with(name, "weight")) return false;
  if (name == "position_embd.weight" || name == "token_types.weight") return false;
  return std::none_of(std::begin(kKeepParts), std::end(kKeepParts),
                      [&](std::string_view part) { return contains(name, part); });
}

enum class Role { token_embd, output, attn_v_like, attn_k, attn_output, ffn, ffn_down, other };

Role role_of(const std::string& name) {
  if (name == "output.weight") return Role::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Role::token_embd;
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
      contains(name, "attn_v.weight"))
    return Role::attn_v_like;
  if (contains(name, "attn_k.weight")) return Role::attn_k;
  if (contains(name, "attn_q.weight")) return Role::other;
  if (contains(name, "attn_output.weight")) return Role::attn_output;
  if (contains(name, "ffn_up") || contains(name, "ffn_gate")) return Role::ffn;
  if (contains(name, "ffn_down")) return Role::ffn_down;
  return Role::other;
}

bool is_quantized(GgmlType t) {
  return t != GgmlType::f32 && t != GgmlType::f16 && t != GgmlType::bf16;
}

// use_more_bits of llama-quantize: the first and last eighth and every third layer between.
bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// The layer an FFN tensor's K-quant rules look at: an MoE model's from the name (which must
// have one), a dense model's the running count of such tensors.
Result<int> ffn_layer(const PolicyModel& m, const std::string& name, int counter) {
  if (m.n_expert <= 1) return counter;
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1)
    return err("cannot determine the layer of tensor %s (expected a blk.N. prefix)", name.c_str());
  if (layer < 0 || layer >= m.n_layer)
    return err("tensor %s: layer %d outside the model's %d layers", name.c_str(), layer, m.n_layer);
  return layer;
}

// Rule 3's mix for a quantized file type.
Result<GgmlType> mix_rule(const TypePolicy& p, const PolicyModel& m, const std::string& name, Role role,
                          const int64_t ne[4], GgmlType t, TypeCounters* c) {
  const GgmlType ft = p.ftype->default_type;
  const bool fp4_moe = ft == GgmlType::mxfp4 || ft == GgmlType::nvfp4;  // NVFP4: MXFP4_MOE's mix
  const std::string_view fname = p.ftype->name;
  const bool k_m = fname == "Q4_K_M", k_s = fname == "Q4_K_S", k5_m = fname == "Q5_K_M";
  if (role == Role::output || (role == Role::token_embd && !m.has_output)) {
    if (p.output_type) return *p.output_type;
    if (fp4_moe || m.arch == "falcon" || ne[0] % type_info(t).block_size != 0) return GgmlType::q8_0;
    return t != GgmlType::q8_0 ? GgmlType::q6_k : t;
  }
  if (fp4_moe) return ne[2] > 1 ? ft : GgmlType::q8_0;
  if (role == Role::attn_v_like) {
    if ((k_m || k5_m) && use_more_bits(c->i_attention_wv, m.n_attention_wv)) t = GgmlType::q6_k;
    if (k_s && c->i_attention_wv < 4) t = GgmlType::q5_k;
    if (m.n_expert == 8) t = GgmlType::q8_0;
    ++c->i_attention_wv;
    return t;
  }
  if (role == Role::attn_k && m.n_expert == 8) return GgmlType::q8_0;
  if (role == Role::attn_output && m.n_expert == 8 && m.arch != "falcon" && (k_m || k_s))
    return GgmlType::q5_k;
  if (role == Role::ffn_down) {
    STRATA_ASSIGN(const int i, ffn_layer(m, name, c->i_ffn_down));
    const int n = m.n_layer;
    if (k_m) {
      if (m.arch == "falcon")
        t = i < n / 16 ? GgmlType::q6_k : (use_more_bits(i, n) ? GgmlType::q5_k : GgmlType::q4_k);
      else if (use_more_bits(i, n))
        t = GgmlType::q6_k;
    } else if (k5_m && use_more_bits(i, n)) {
      t = GgmlType::q6_k;
    } else if (k_s && m.arch != "falcon" && i < n / 8) {
      t = GgmlType::q5_k;
    } else if ((fname == "Q4_0" || fname == "Q5_0") && p.has_imatrix && i < n / 8) {
      t = fname == "Q4_0" ? GgmlType::q4_1 : GgmlType::q5_1;
    }
    ++c->i_ffn_down;
    return t;
  }
  if (role == Role::ffn) STRATA_TRY(ffn_layer(m, name, 0).status());
  return t;
}

// Rule 4: a row the block does not divide.
GgmlType fallback(GgmlType t, int64_t ncols, bool* fell_back) {
  if (ncols % type_info(t).block_size == 0) return t;
  *fell_back = true;
  // 256-element K-quants step down to a 32-element type; 32-element types have nowhere to go.
  GgmlType r = t;
  if (t == GgmlType::q6_k) r = GgmlType::q8_0;
  if (t == GgmlType::q4_k) r = GgmlType::q5_0;
  if (t == GgmlType::q5_k) r = GgmlType::q5_1;
  if (ncols % type_info(r).block_size != 0) r = GgmlType::f16;
  return r;
}

}  // namespace

Result<TensorTypeRule> parse_tensor_type_rule(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos) return err("--tensor-type '%s': expected REGEX=TYPE", spec.c_str());
  if (eq == 0) return err("--tensor-type '%s': missing the tensor name pattern", spec.c_str());
  if (eq + 1 == spec.size()) return err("--tensor-type '%s': missing the type", spec.c_str());
  TensorTypeRule r;
  r.pattern = spec.substr(0, eq);
  std::transform(r.pattern.begin(), r.pattern.end(), r.pattern.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string tname = spec.substr(eq + 1);
  if (!type_from_name(tname, &r.type))
    return err("--tensor-type '%s': unknown type '%s'", spec.c_str(), tname.c_str());
  try {
    r.regex = std::make_shared<const NameRegex>(r.pattern);
  } catch (const std::regex_error& e) {
    return err("--tensor-type '%s': bad regex '%s': %s", spec.c_str(), r.pattern.c_str(), e.what());
  }
  return r;
}

bool is_attn_v_like(const std::string& name) {
  return role_of(name) == Role::attn_v_like;
}

Result<TypeChoice> choose_tensor_type(const TypePolicy& p, const PolicyModel& m, const std::string& name,
                                      GgmlType src, const int64_t ne[4], TypeCounters* counters) {
  TypeChoice c{src, convertible(name, ne), false};
  GgmlType by_class;
  const bool classed =
      effective_dims(ne) >= 2 && class_policy_type(p.class_rules, name, m.n_layer, &by_class);
  if (!c.convertible && !classed) return c;
  c.convertible = true;
  const Role role = role_of(name);
  if (p.token_embd_type && role == Role::token_embd) {
    // per_layer_token_embd follows --token-embedding-type unless a --tensor-type names it.
    const bool named = name == "per_layer_token_embd.weight" &&
                       std::any_of(p.tensor_types.begin(), p.tensor_types.end(),
                                   [&](const TensorTypeRule& r) { return r.matches(name); });
    if (!named) {
      c.type = *p.token_embd_type;
      return c;
    }
  }
  if (p.output_type && role == Role::output) {
    c.type = *p.output_type;
    return c;
  }
  c.type = p.ftype->default_type;
  bool manual = false;
  if (is_quantized(c.type)) {
    for (const TensorTypeRule& r : p.tensor_types) {
      if (r.matches(name)) {
        c.type = r.type;
        manual = true;
        break;
      }
    }
  }
  if (!manual && classed) {
    c.type = by_class;
  } else if (!manual && !p.pure && is_quantized(c.type)) {
    STRATA_ASSIGN(c.type, mix_rule(p, m, name, role, ne, c.type, counters));
  }
  if (manual || classed || is_quantized(p.ftype->default_type))
    c.type = fallback(c.type, ne[0], &c.fell_back);
  return c;
}

}  // namespace strata
