// The KV bill of DeepSeek-V4.1 ("CSA2", deepseek-v4.md §4.2 / §5.3; kv_bill.h): the layer schedule
// from config.json (the same derivation as model/v41_config.cpp, which memory/ cannot call), the
// cache lines it implies, and its text section.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <initializer_list>

#include "memory/plan/kv_bill.h"

namespace strata {

namespace {

using nlohmann::json;

// The first of `names` present (DeepSeek's ModelArgs name first, then the Hugging Face one).
const json* find_key(const json& j, std::initializer_list<const char*> names, const char** used) {
  for (const char* n : names) {
    auto it = j.find(n);
    if (it != j.end() && !it->is_null()) {
      *used = n;
      return &*it;
    }
  }
  *used = *names.begin();
  return nullptr;
}

Result<int64_t> get_int(const json& j, std::initializer_list<const char*> names, const std::string& src,
                        bool required, int64_t dflt = 0) {
  const char* key;
  const json* v = find_key(j, names, &key);
  if (!v) {
    if (required) return err("%s: missing key \"%s\"", src.c_str(), key);
    return dflt;
  }
  if (!v->is_number_integer() || v->get<int64_t>() < 0)
    return err("%s: \"%s\" must be a non-negative integer", src.c_str(), key);
  return v->get<int64_t>();
}

template <class T>
Result<std::vector<T>> get_list(const json& j, std::initializer_list<const char*> names,
                                const std::string& src, bool required) {
  const char* key;
  const json* v = find_key(j, names, &key);
  std::vector<T> out;
  if (!v) {
    if (required) return err("%s: missing key \"%s\"", src.c_str(), key);
    return out;
  }
  if (!v->is_array()) return err("%s: \"%s\" must be a list of integers", src.c_str(), key);
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_number_integer()) return err("%s: \"%s\"[%zu] is not an integer", src.c_str(), key, i);
    out.push_back((*v)[i].get<T>());
  }
  return out;
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

const char* kv_layer_mode_name(KvLayerMode m) {
  switch (m) {
    case KvLayerMode::window:
      return "window";
    case KvLayerMode::full:
      return "full";
    case KvLayerMode::reindex:
      return "reindex";
    case KvLayerMode::reuse:
      return "reuse";
  }
  return "?";
}

bool kv_is_v41_config(const json& j) {
  if (j.value("model_type", std::string()) == "deepseek_v41") return true;
  return j.contains("kv_source_layers") || j.contains("kv_source_layer_ids");
}

Result<KvModelSpec> kv_spec_from_v41_json(const json& j, const std::string& source) {
  KvModelSpec s;
  s.source = source;
  s.arch = "deepseek_v41";
  s.family = KvFamily::deepseek_v41;
  const char* src = source.c_str();
  STRATA_ASSIGN(int64_t n_layer, get_int(j, {"n_layers", "num_hidden_layers"}, source, true));
  if (n_layer <= 0 || n_layer > 100000)
    return err("%s: n_layers = %lld", src, static_cast<long long>(n_layer));
  s.n_layer = static_cast<int>(n_layer);
  STRATA_ASSIGN(int64_t hd, get_int(j, {"head_dim"}, source, true));
  STRATA_ASSIGN(int64_t ihd, get_int(j, {"index_head_dim"}, source, false));
  STRATA_ASSIGN(int64_t win, get_int(j, {"window_size", "sliding_window"}, source, true));
  STRATA_ASSIGN(s.n_ctx_train, get_int(j, {"max_seq_len", "max_position_embeddings"}, source, false));
  if (hd <= 0) return err("%s: head_dim must be > 0", src);
  if (win <= 0) return err("%s: window_size must be > 0", src);
  s.head_dim = static_cast<int>(hd);
  s.indexer_head_dim = static_cast<int>(ihd);
  s.n_swa = static_cast<int>(win);
  STRATA_ASSIGN(auto ratios, get_list<int>(j, {"compress_ratios"}, source, true));
  if (static_cast<int64_t>(ratios.size()) < n_layer)
    return err("%s: compress_ratios has %zu entries, n_layers is %d", src, ratios.size(), s.n_layer);
  ratios.resize(static_cast<size_t>(n_layer));  // extra entries: MTP / DSpark stages
  STRATA_ASSIGN(auto kv_src, get_list<int>(j, {"kv_source_layers", "kv_source_layer_ids"}, source, true));
  STRATA_ASSIGN(auto idx_src,
                get_list<int>(j, {"index_source_layers", "index_source_layer_ids"}, source, false));
  for (int l = 0; l < s.n_layer; ++l)
    if (ratios[l] < 0 || ratios[l] > 2)
      return err("%s: compress_ratios[%d] = %d (V4.1 uses 0, 1 or 2)", src, l, ratios[l]);
  for (int v : kv_src)
    if (v < 0 || v >= s.n_layer || ratios[v] == 0)
      return err("%s: kv_source_layers entry %d is not a compressed layer", src, v);
  for (int v : idx_src)
    if (v < 0 || v >= s.n_layer || ratios[v] == 0)
      return err("%s: index_source_layers entry %d is not a compressed layer", src, v);
  if (!idx_src.empty() && ihd <= 0) return err("%s: index sources need index_head_dim > 0", src);
  s.compress_ratios = ratios;
  s.layer_mode.assign(static_cast<size_t>(n_layer), KvLayerMode::window);
  s.layer_kv_src.assign(static_cast<size_t>(n_layer), -1);
  s.layer_index_keys.assign(static_cast<size_t>(n_layer), false);
  for (int l = 0; l < s.n_layer; ++l) {
    if (ratios[l] == 0) continue;
    const bool kv = contains(kv_src, l), idx = contains(idx_src, l);
    s.layer_mode[l] = kv ? KvLayerMode::full : idx ? KvLayerMode::reindex : KvLayerMode::reuse;
    s.layer_index_keys[l] = kv && idx;
    for (int k = l; k >= 0; --k)
      if (contains(kv_src, k)) {
        s.layer_kv_src[l] = k;
        break;
      }
    if (s.layer_kv_src[l] < 0)
      return err("%s: layer %d (ratio %d) has no KV source at or before it", src, l, ratios[l]);
    if (ratios[s.layer_kv_src[l]] != ratios[l])
      return err("%s: layer %d has ratio %d but its KV source layer %d has ratio %d", src, l, ratios[l],
                 s.layer_kv_src[l], ratios[s.layer_kv_src[l]]);
  }
  STRATA_ASSIGN(s.engram_layers, get_list<int>(j, {"engram_layer_ids"}, source, false));
  STRATA_ASSIGN(s.engram_rows, get_list<int64_t>(j, {"engram_num_embeddings"}, source, false));
  if (!s.engram_layers.empty()) {
    if (s.engram_rows.size() != s.engram_layers.size())
      return err("%s: engram_num_embeddings has %zu entries for %zu engram layers", src, s.engram_rows.size(),
                 s.engram_layers.size());
    STRATA_ASSIGN(int64_t ehd, get_int(j, {"engram_head_dim"}, source, true));
    STRATA_ASSIGN(int64_t ng, get_int(j, {"engram_max_ngram_size"}, source, true));
    STRATA_ASSIGN(int64_t eh, get_int(j, {"engram_n_heads"}, source, true));
    if (ehd <= 0 || ehd % 32 || ng < 2 || eh <= 0)
      return err(
          "%s: engram_head_dim %lld (multiple of 32), engram_max_ngram_size %lld (>= 2), engram_n_heads %lld",
          src, static_cast<long long>(ehd), static_cast<long long>(ng), static_cast<long long>(eh));
    s.engram_head_dim = static_cast<int>(ehd);
    s.engram_cols = static_cast<int>((ng - 1) * eh);
    for (size_t k = 0; k < s.engram_layers.size(); ++k)
      if (s.engram_layers[k] < 0 || s.engram_layers[k] >= s.n_layer || s.engram_rows[k] <= 0)
        return err("%s: engram table %zu: layer %d / %lld rows invalid", src, k, s.engram_layers[k],
                   static_cast<long long>(s.engram_rows[k]));
  }
  return s;
}

void kv_bill_add_v41_lines(const KvModelSpec& s, std::vector<KvBillLine>* lines) {
  auto add = [&](const char* name, std::string what, int n_layers, int64_t width, int ratio,
                 int64_t fixed_rows, bool f32_state, KvType native) {
    kv_bill_add_line(lines, name, std::move(what), n_layers, width, ratio, fixed_rows, f32_state, &native);
  };
  int full[3] = {0, 0, 0}, keys[3] = {0, 0, 0};
  for (int l = 0; l < s.n_layer; ++l)
    if (s.layer_mode[l] == KvLayerMode::full) {
      ++full[s.compress_ratios[l]];
      keys[s.compress_ratios[l]] += s.layer_index_keys[l] ? 1 : 0;
    }
  const int hd = s.head_dim, ihd = s.indexer_head_dim;
  add("compressed_r2", "ratio-2 compressed KV (KV sources; 1 row / 2 tokens)", full[2], hd, 2, 0, false,
      KvType::nvfp4);
  add("index_keys_r2", "ratio-2 index keys (KV + index sources)", keys[2], ihd, 2, 0, false, KvType::mxfp4);
  add("compressed_r1", "ratio-1 compressed KV (KV sources; 1 row / token)", full[1], hd, 1, 0, false,
      KvType::nvfp4);
  add("index_keys_r1", "ratio-1 index keys (KV + index sources)", keys[1], ihd, 1, 0, false, KvType::mxfp4);
  add("window", "sliding-window ring (K=V, every layer)", s.n_layer, hd, 0, s.n_swa, false, KvType::fp8_e4m3);
  // A ratio-2 source holds the first token of an open group: kv + score rows, f32.
  add("compressor_state_r2", "ratio-2 compressor pending token (kv + score)", full[2], 2 * int64_t{hd}, 0, 1,
      true, KvType::f32);
}

std::string kv_bill_v41_text(const KvModelSpec& s) {
  std::string out;
  char buf[512];
  int n_mode[4] = {0, 0, 0, 0};
  for (KvLayerMode m : s.layer_mode) ++n_mode[static_cast<int>(m)];
  std::snprintf(buf, sizeof buf,
                "  layers: %d window-only, %d Full (KV sources: own compressed KV), %d Reindex, %d Reuse "
                "(Reindex/Reuse own no compressed KV); window %d, head %d, index head %d\n",
                n_mode[0], n_mode[1], n_mode[2], n_mode[3], s.n_swa, s.head_dim, s.indexer_head_dim);
  out += buf;
  out += "  per layer (ratio mode [KV read from layer] +owned caches):\n";
  std::string line = "   ";
  for (int l = 0; l < s.n_layer; ++l) {
    const KvLayerMode m = s.layer_mode[l];
    std::string own = "win";
    if (m == KvLayerMode::full) own += "+ckv";
    if (s.layer_index_keys[l]) own += "+ik";
    if (m == KvLayerMode::window)
      std::snprintf(buf, sizeof buf, " %2d:r0 window %s", l, own.c_str());
    else
      std::snprintf(buf, sizeof buf, " %2d:r%d %s[%d] %s", l, s.compress_ratios[l], kv_layer_mode_name(m),
                    s.layer_kv_src[l], own.c_str());
    if (line.size() + std::string(buf).size() > 110) {
      out += line + "\n";
      line = "   ";
    }
    line += buf;
  }
  out += line + "\n";
  if (!s.engram_layers.empty()) {
    uint64_t total = 0;
    std::string tl;
    for (size_t k = 0; k < s.engram_layers.size(); ++k) {
      const uint64_t b = static_cast<uint64_t>(s.engram_rows[k]) *
                         static_cast<uint64_t>(s.engram_head_dim + s.engram_head_dim / 32);
      total += b;
      std::snprintf(buf, sizeof buf, "%slayer %d: %" PRId64 " rows", k ? ", " : "", s.engram_layers[k],
                    s.engram_rows[k]);
      tl += buf;
    }
    std::snprintf(
        buf, sizeof buf,
        "  Engram tables (weights, not KV; placed by --engram-budget, see strata plan): %zu (%s) x %d "
        "columns, %.3f GB as FP8 + UE8M0; %d rows per token per table\n",
        s.engram_layers.size(), tl.c_str(), s.engram_head_dim, static_cast<double>(total) / 1e9,
        s.engram_cols);
    out += buf;
  }
  return out;
}

}  // namespace strata
