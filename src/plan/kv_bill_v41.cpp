// The KV bill of DeepSeek-V4.1 ("CSA2", deepseek-v4.md §4.2 / §5.3; kv_bill.h): the config parsed
// and its layer schedule derived by model/deepseek_v41/v41_config, the parts by the registry
// entry's kv_spec_config (v41_kv_spec), and the bill's text section.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <initializer_list>

#include <string_view>

#include "model/arch.h"
#include "model/deepseek_v41/v41_config.h"
#include "plan/kv_bill.h"

namespace strata {

// The architecture registry's checkpoint-directory entry decides (model/arch.cpp): the same
// config.json match and KV spec as Model::load of the directory.
bool kv_is_v41_config(const nlohmann::json& j) {
  const ArchEntry* e = arch_find_config(j);
  return e && std::string_view(e->name) == "deepseek_v41";
}

Result<KvModelSpec> kv_spec_from_v41_config(const std::string& text, const std::string& source) {
  STRATA_ASSIGN(v41::Config c, v41::parse_config(text, source));
  KvModelSpec s;
  s.source = source;
  s.arch = "deepseek_v41";
  s.family = KvFamily::deepseek_v41;
  s.n_layer = c.n_layers;
  s.n_ctx_train = c.max_seq_len;
  STRATA_ASSIGN(s.kv, arch_find("deepseek_v41", ArchSource::checkpoint_dir)->kv_spec_config(text, source));
  s.n_swa = c.window;
  s.head_dim = c.head_dim;
  s.indexer_head_dim = c.idx_dim;
  for (int l = 0; l < c.n_layers; ++l) {
    const v41::LayerCfg& lc = c.layers[static_cast<size_t>(l)];
    s.compress_ratios.push_back(lc.ratio);
    s.layer_mode.push_back(lc.mode);
    s.layer_kv_src.push_back(lc.ratio ? lc.kv_src : -1);
    s.layer_index_keys.push_back(lc.owns_index_k);
  }
  s.engram_layers = c.engram_layers;
  s.engram_rows = c.engram_rows;
  s.engram_head_dim = c.engram_head_dim;
  s.engram_cols = c.engram_layers.empty() ? 0 : c.n_hash_cols();
  return s;
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
      std::snprintf(buf, sizeof buf, " %2d:r%d %s[%d] %s", l, s.compress_ratios[l], v41::layer_mode_name(m),
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
