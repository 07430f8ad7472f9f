// Reading a KvModelSpec from GGUF metadata or a Hugging Face config.json (kv_bill.h): the parts
// always come from an architecture's spec builder (model/), never from a formula of this file.
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "model/arch.h"
#include "model/archs/decoder.h"
#include "model/deepseek4/ds4_forward.h"
#include "plan/kv_bill.h"

namespace strata {

namespace {

// An MLA model (DeepSeek-V2/V3; strata does not run one): one latent per token and layer.
KvSpec mla_spec(int n_layer, int64_t width) {
  KvSpec s;
  s.layers.resize(static_cast<size_t>(n_layer));
  for (KvLayerSpec& l : s.layers)
    l.parts.push_back(kv_part_full("mla", "MLA latent (kv_lora_rank + rope)", width));
  return s;
}

// The standard decoder's spec for layers of n_head_kv heads, the flagged ones sliding over n_swa.
KvSpec standard_spec(int n_layer, const std::vector<int>& n_head_kv, int hk, int hv,
                     const std::vector<bool>& swa, int n_swa) {
  HParams hp;
  hp.n_layer = n_layer;
  hp.head_dim_k = hk;
  hp.head_dim_v = hv;
  hp.layers.resize(static_cast<size_t>(n_layer));
  for (int il = 0; il < n_layer; ++il) {
    LayerParams& l = hp.layers[static_cast<size_t>(il)];
    l.n_head_kv = n_head_kv[static_cast<size_t>(il)];
    if (n_swa > 0 && swa[static_cast<size_t>(il)]) {
      l.attn_kind = AttnKind::attn_kind_sliding;
      l.window = n_swa;
    }
  }
  return decoder_kv_spec(hp);
}

// deepseek4's spec from the few numbers its KV parts depend on.
KvSpec ds4_spec(int n_layer, int head_dim, int ihd, int n_swa, const std::vector<int>& ratios) {
  ds4::Ds4Params p;
  p.n_layer = n_layer;
  p.head_dim = head_dim;
  p.ihd = ihd;
  p.n_swa = n_swa;
  p.ratios = ratios;
  return ds4::ds4_kv_spec(p);
}

// The text's facts of a DeepSeek family, read off the spec's parts.
void summarize_ds4(KvModelSpec& s) {
  s.compress_ratios.assign(static_cast<size_t>(s.kv.n_layer()), 0);
  for (int il = 0; il < s.kv.n_layer(); ++il)
    for (const KvPartSpec& p : s.kv.layers[static_cast<size_t>(il)].parts) {
      if (p.kind == KvPartKind::window)
        s.n_swa = static_cast<int>(p.window), s.head_dim = static_cast<int>(p.width);
      if (p.kind == KvPartKind::compressed) s.compress_ratios[static_cast<size_t>(il)] = p.ratio;
      if (p.kind == KvPartKind::indexer) s.indexer_head_dim = static_cast<int>(p.width);
    }
}

}  // namespace

static Status check_ratios(const std::vector<int>& ratios, const std::string& key) {
  for (size_t i = 0; i < ratios.size(); ++i) {
    const int r = ratios[i];
    if (r != 0 && r != 4 && r != 128)
      return err("%s[%zu] = %d: DeepSeek-V4 supports compress ratios 0, 4 and 128 only", key.c_str(), i, r);
  }
  return {};
}

// Per-layer int from a scalar or an array key (llama.cpp get_key_or_arr).
static Result<std::vector<int>> int_or_array(const GgufFile& f, const std::string& key, int n_layer, int dflt,
                                             bool required) {
  const GgufValue* v = f.find(key);
  if (!v) {
    if (required) return err("missing key %s", key.c_str());
    return std::vector<int>(static_cast<size_t>(n_layer), dflt);
  }
  if (v->as_array()) {
    STRATA_ASSIGN(auto arr, f.get_int_array(key));
    if (static_cast<int>(arr.size()) < n_layer)
      return err("%s has %zu entries, expected >= %d (block_count)", key.c_str(), arr.size(), n_layer);
    std::vector<int> out(static_cast<size_t>(n_layer));
    for (int i = 0; i < n_layer; ++i) out[i] = static_cast<int>(arr[i]);
    return out;
  }
  STRATA_ASSIGN(int64_t x, f.get_int(key));
  return std::vector<int>(static_cast<size_t>(n_layer), static_cast<int>(x));
}

static Result<int> positive_int(const GgufFile& f, const std::string& key) {
  STRATA_ASSIGN(int64_t v, f.get_int(key));
  if (v <= 0 || v > (int64_t{1} << 30))
    return err("%s = %lld: expected a positive size", key.c_str(), (long long)v);
  return static_cast<int>(v);
}

Result<KvModelSpec> kv_spec_from_gguf(const GgufFile& f) {
  KvModelSpec s;
  STRATA_ASSIGN(s.arch, f.get_string("general.architecture"));
  s.source = f.path();
  const std::string a = s.arch + ".";
  STRATA_ASSIGN(s.n_ctx_train, f.get_int_or(a + "context_length", 0));
  if (arch_find(s.arch)) {  // an architecture strata runs: exactly what its sessions allocate
    STRATA_ASSIGN(s.kv, arch_kv_spec(f));
    s.n_layer = s.kv.n_layer();
    if (s.arch == "deepseek4") {
      s.family = KvFamily::deepseek4;
      summarize_ds4(s);
    }
    return s;
  }
  STRATA_ASSIGN(int n_all, positive_int(f, a + "block_count"));
  STRATA_ASSIGN(int64_t nextn, f.get_int_or(a + "nextn_predict_layers", 0));
  s.n_layer = n_all - static_cast<int>(nextn);
  if (s.n_layer <= 0)
    return err("%sblock_count = %d leaves no main layers after %lld nextn layers", a.c_str(), n_all,
               (long long)nextn);
  STRATA_ASSIGN(int64_t n_swa, f.get_int_or(a + "attention.sliding_window", 0));
  if (f.find(a + "attention.kv_lora_rank")) {
    s.family = KvFamily::mla;
    STRATA_ASSIGN(int rank, positive_int(f, a + "attention.kv_lora_rank"));
    STRATA_ASSIGN(int64_t rope, f.get_int_or(a + "rope.dimension_count", 64));
    s.kv = mla_spec(s.n_layer, rank + rope);
    return s;
  }
  STRATA_ASSIGN(int n_embd, positive_int(f, a + "embedding_length"));
  STRATA_ASSIGN(auto n_head, int_or_array(f, a + "attention.head_count", s.n_layer, 0, true));
  STRATA_ASSIGN(auto n_head_kv, int_or_array(f, a + "attention.head_count_kv", s.n_layer, n_head[0], false));
  const int head0 = n_head[0] > 0 ? n_embd / n_head[0] : 0;
  STRATA_ASSIGN(int64_t hk, f.get_int_or(a + "attention.key_length", head0));
  STRATA_ASSIGN(int64_t hv, f.get_int_or(a + "attention.value_length", hk));
  if (hk <= 0 || hv <= 0)
    return err("%sattention.key_length/value_length: cannot derive the head size", a.c_str());
  std::vector<bool> swa(static_cast<size_t>(s.n_layer), false);
  // Which layers slide is fixed per architecture in llama.cpp; a period key where the file has one.
  if (const GgufValue* p = f.find(a + "attention.sliding_window_pattern");
      n_swa > 0 && p && p->is_integer()) {
    int64_t n = 0;
    p->as_int(&n);
    for (int il = 0; n > 1 && il < s.n_layer; ++il) swa[static_cast<size_t>(il)] = (il % n) < (n - 1);
  }
  s.kv = standard_spec(s.n_layer, n_head_kv, static_cast<int>(hk), static_cast<int>(hv), swa,
                       static_cast<int>(n_swa));
  return s;
}

static Result<int64_t> jint(const nlohmann::json& j, const char* key, const std::string& src) {
  auto it = j.find(key);
  if (it == j.end()) return err("%s: missing key \"%s\"", src.c_str(), key);
  if (!it->is_number_integer()) return err("%s: \"%s\" must be an integer", src.c_str(), key);
  return it->get<int64_t>();
}

static Result<int64_t> jint_or(const nlohmann::json& j, const char* key, int64_t dflt,
                               const std::string& src) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_number_integer()) return err("%s: \"%s\" must be an integer", src.c_str(), key);
  return it->get<int64_t>();
}

Result<KvModelSpec> kv_spec_from_hf_config_text(const std::string& text, const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return err("%s: not a JSON object (config.json expected)", source.c_str());
  if (j.contains("text_config") && j["text_config"].is_object() && !j.contains("num_hidden_layers"))
    j = j["text_config"];  // multimodal wrappers keep the LM config inside
  if (kv_is_v41_config(j)) return kv_spec_from_v41_config(j.dump(), source);
  KvModelSpec s;
  s.source = source;
  s.arch = j.value("model_type", std::string("unknown"));
  STRATA_ASSIGN(int64_t n_layer, jint(j, "num_hidden_layers", source));
  if (n_layer <= 0) return err("%s: num_hidden_layers = %lld", source.c_str(), (long long)n_layer);
  s.n_layer = static_cast<int>(n_layer);
  STRATA_ASSIGN(s.n_ctx_train, jint_or(j, "max_position_embeddings", 0, source));
  STRATA_ASSIGN(int64_t n_swa_key, jint_or(j, "sliding_window", 0, source));
  int n_swa = static_cast<int>(n_swa_key);

  if (j.contains("compress_ratios")) {
    s.family = KvFamily::deepseek4;
    STRATA_ASSIGN(int64_t hd, jint(j, "head_dim", source));
    STRATA_ASSIGN(int64_t ihd, jint(j, "index_head_dim", source));
    if (n_swa <= 0) return err("%s: missing or zero \"sliding_window\"", source.c_str());
    const auto& r = j["compress_ratios"];
    if (!r.is_array() || static_cast<int64_t>(r.size()) < n_layer)
      return err("%s: \"compress_ratios\" must be an array of >= %lld (num_hidden_layers) integers",
                 source.c_str(), (long long)n_layer);
    for (int i = 0; i < s.n_layer; ++i) {
      if (!r[i].is_number_integer())
        return err("%s: compress_ratios[%d] is not an integer", source.c_str(), i);
      s.compress_ratios.push_back(r[i].get<int>());
    }
    STRATA_TRY(check_ratios(s.compress_ratios, source + ": compress_ratios"));
    s.kv = ds4_spec(s.n_layer, static_cast<int>(hd), static_cast<int>(ihd), n_swa, s.compress_ratios);
    summarize_ds4(s);
    return s;
  }
  if (j.contains("kv_lora_rank") && !j["kv_lora_rank"].is_null()) {
    s.family = KvFamily::mla;
    STRATA_ASSIGN(int64_t rank, jint(j, "kv_lora_rank", source));
    STRATA_ASSIGN(int64_t rope, jint_or(j, "qk_rope_head_dim", 64, source));
    s.kv = mla_spec(s.n_layer, rank + rope);
    return s;
  }
  STRATA_ASSIGN(int64_t n_head, jint(j, "num_attention_heads", source));
  STRATA_ASSIGN(int64_t n_kv, jint_or(j, "num_key_value_heads", n_head, source));
  STRATA_ASSIGN(int64_t hidden, jint_or(j, "hidden_size", 0, source));
  STRATA_ASSIGN(int64_t hd, jint_or(j, "head_dim", n_head > 0 ? hidden / n_head : 0, source));
  if (hd <= 0) return err("%s: cannot derive the head size (head_dim / hidden_size)", source.c_str());
  std::vector<bool> swa(static_cast<size_t>(n_layer), false);
  if (j.contains("use_sliding_window") && j["use_sliding_window"] == false) n_swa = 0;
  if (n_swa > 0 && j.contains("layer_types") && j["layer_types"].is_array()) {
    const auto& lt = j["layer_types"];
    for (int i = 0; i < s.n_layer && i < static_cast<int>(lt.size()); ++i)
      swa[static_cast<size_t>(i)] = lt[i].is_string() && lt[i].get<std::string>() == "sliding_attention";
  } else if (n_swa > 0) {
    swa.assign(static_cast<size_t>(n_layer), true);  // e.g. Mistral: every layer slides
  }
  s.kv = standard_spec(s.n_layer, std::vector<int>(static_cast<size_t>(n_layer), static_cast<int>(n_kv)),
                       static_cast<int>(hd), static_cast<int>(hd), swa, n_swa);
  return s;
}

Result<KvModelSpec> kv_spec_from_hf_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return err("cannot open %s", path.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  return kv_spec_from_hf_config_text(ss.str(), path);
}

}  // namespace strata
