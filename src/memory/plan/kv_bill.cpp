#include "memory/plan/kv_bill.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace strata {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::f32:
      return "f32";
    case KvType::f16:
      return "f16";
    case KvType::bf16:
      return "bf16";
    case KvType::q8_0:
      return "q8_0";
    case KvType::fp8_e4m3:
      return "fp8_e4m3";
    case KvType::mxfp4:
      return "mxfp4";
    case KvType::nvfp4:
      return "nvfp4";
  }
  return "?";
}

bool kv_type_supported(KvType t) {
  return t == KvType::f32;
}

uint64_t kv_row_bytes(KvType t, int64_t width) {
  const uint64_t w = static_cast<uint64_t>(width);
  const uint64_t blocks = (w + 31) / 32;
  switch (t) {
    case KvType::f32:
      return 4 * w;
    case KvType::f16:
    case KvType::bf16:
      return 2 * w;
    case KvType::q8_0:
      return 34 * blocks;
    case KvType::fp8_e4m3:
      return 33 * blocks;
    case KvType::mxfp4:
      return 17 * blocks;
    case KvType::nvfp4:
      return 9 * ((w + 15) / 16);
  }
  return 0;
}

void kv_bill_add_line(std::vector<KvBillLine>* lines, std::string name, std::string what, int n_layers,
                      int64_t width, int ratio, int64_t fixed_rows, bool f32_state, const KvType* native) {
  if (n_layers <= 0 || width <= 0) return;
  KvBillLine l;
  l.name = std::move(name);
  l.what = std::move(what);
  l.n_layers = n_layers;
  l.width = width;
  l.ratio = ratio;
  l.fixed_rows = fixed_rows;
  l.f32_state = f32_state;
  if (native) {
    l.has_native = true;
    l.native = *native;
  }
  lines->push_back(std::move(l));
}

int64_t KvBillLine::rows(int64_t n_ctx) const {
  if (ratio > 0) return (n_ctx + ratio - 1) / ratio;
  return f32_state ? fixed_rows : std::min<int64_t>(fixed_rows, n_ctx);
}

uint64_t KvBillLine::row_bytes(KvType t) const {
  return kv_row_bytes(f32_state ? KvType::f32 : t, width);
}

uint64_t KvBillLine::bytes(KvType t, int64_t n_ctx) const {
  return static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(rows(n_ctx)) * row_bytes(t);
}

double KvBillLine::bytes_per_token(KvType t) const {
  if (ratio <= 0) return 0.0;
  return static_cast<double>(n_layers) * static_cast<double>(row_bytes(t)) / ratio;
}

double KvBill::bytes_per_token(KvType t) const {
  double s = 0;
  for (const auto& l : lines) s += l.bytes_per_token(t);
  return s;
}

uint64_t KvBill::fixed_bytes(KvType t) const {
  uint64_t s = 0;
  for (const auto& l : lines)
    if (l.ratio <= 0)
      s += static_cast<uint64_t>(l.n_layers) * static_cast<uint64_t>(l.fixed_rows) * l.row_bytes(t);
  return s;
}

uint64_t KvBill::total_bytes(KvType t, int64_t n_ctx) const {
  uint64_t s = 0;
  for (const auto& l : lines) s += l.bytes(t, n_ctx);
  return s;
}

bool KvBill::has_native() const {
  for (const auto& l : lines)
    if (l.has_native) return true;
  return false;
}

double KvBill::native_bytes_per_token() const {
  double s = 0;
  for (const auto& l : lines) s += l.bytes_per_token(l.native);
  return s;
}

uint64_t KvBill::native_fixed_bytes() const {
  uint64_t s = 0;
  for (const auto& l : lines)
    if (l.ratio <= 0)
      s += static_cast<uint64_t>(l.n_layers) * static_cast<uint64_t>(l.fixed_rows) * l.row_bytes(l.native);
  return s;
}

uint64_t KvBill::native_total_bytes(int64_t n_ctx) const {
  uint64_t s = 0;
  for (const auto& l : lines) s += l.bytes(l.native, n_ctx);
  return s;
}

static int count_ratio(const KvModelSpec& s, int r) {
  return static_cast<int>(std::count(s.compress_ratios.begin(), s.compress_ratios.end(), r));
}

KvBill kv_bill_make(const KvModelSpec& spec) {
  KvBill b;
  b.spec = spec;
  auto add = [&](const char* name, std::string what, int n_layers, int64_t width, int ratio,
                 int64_t fixed_rows, bool f32_state) {
    kv_bill_add_line(&b.lines, name, std::move(what), n_layers, width, ratio, fixed_rows, f32_state);
  };
  if (spec.family == KvFamily::deepseek4) {
    const int n_csa = count_ratio(spec, 4), n_hca = count_ratio(spec, 128);
    const int hd = spec.head_dim, ihd = spec.indexer_head_dim;
    add("csa", "CSA compressed KV (1 row / 4 tokens)", n_csa, hd, 4, 0, false);
    add("hca", "HCA compressed KV (1 row / 128 tokens)", n_hca, hd, 128, 0, false);
    add("indexer", "CSA indexer keys (1 row / 4 tokens)", n_csa, ihd, 4, 0, false);
    add("window", "sliding-window ring (raw K=V)", spec.n_layer, hd, 0, spec.n_swa, false);
    // compressor rolling state: rows x (kv + score), f32 (llama.cpp: (2*hd, 8), (hd, 128), (2*ihd, 8))
    add("csa_state", "CSA compressor state (8 tokens x kv+score)", n_csa, 2 * (2 * hd), 0, 8, true);
    add("indexer_state", "indexer compressor state (8 tokens x kv+score)", n_csa, 2 * (2 * ihd), 0, 8, true);
    add("hca_state", "HCA compressor state (128 tokens x kv+score)", n_hca, 2 * hd, 0, 128, true);
    return b;
  }
  if (spec.family == KvFamily::deepseek_v41) {
    kv_bill_add_v41_lines(spec, &b.lines);
    return b;
  }
  if (spec.family == KvFamily::mla) {
    add("mla", "MLA latent (kv_lora_rank + rope)", spec.n_layer, spec.mla_width, 1, 0, false);
    return b;
  }
  // classic: group layers by (kv heads, swa) so the bill stays short
  struct Group {
    int n_head_kv;
    bool swa;
    int n_layers;
  };
  std::vector<Group> groups;
  for (int il = 0; il < spec.n_layer; ++il) {
    const int h = il < static_cast<int>(spec.n_head_kv.size()) ? spec.n_head_kv[il] : 0;
    const bool swa = il < static_cast<int>(spec.swa_layer.size()) && spec.swa_layer[il] && spec.n_swa > 0;
    if (h <= 0) continue;  // a layer without KV (e.g. recurrent) costs nothing here
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return g.n_head_kv == h && g.swa == swa; });
    if (it == groups.end())
      groups.push_back({h, swa, 1});
    else
      ++it->n_layers;
  }
  for (const auto& g : groups) {
    char what[160];
    const int64_t width = static_cast<int64_t>(g.n_head_kv) * (spec.head_dim_k + spec.head_dim_v);
    std::snprintf(what, sizeof what, "%s K+V (%d kv heads x (%d + %d))",
                  g.swa ? "sliding-window" : "full-attention", g.n_head_kv, spec.head_dim_k, spec.head_dim_v);
    if (g.swa)
      add("swa_kv", what, g.n_layers, width, 0, spec.n_swa, false);
    else
      add("kv", what, g.n_layers, width, 1, 0, false);
  }
  return b;
}

static std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

static const char* family_name(KvFamily f) {
  switch (f) {
    case KvFamily::classic:
      return "classic attention";
    case KvFamily::mla:
      return "multi-head latent attention";
    case KvFamily::deepseek4:
      return "DeepSeek-V4 hybrid attention (window + CSA/HCA)";
    case KvFamily::deepseek_v41:
      return "DeepSeek-V4.1 CSA2 (window + compressed KV shared across layers)";
  }
  return "?";
}

std::string kv_bill_text(const KvBill& bill, int64_t n_ctx) {
  std::string out;
  char buf[512];
  const auto& s = bill.spec;
  std::snprintf(buf, sizeof buf, "KV memory bill: %s (%s), %d layers, from %s\n", s.arch.c_str(),
                family_name(s.family), s.n_layer, s.source.c_str());
  out += buf;
  if (s.family == KvFamily::deepseek4) {
    std::snprintf(buf, sizeof buf,
                  "  layers: %d window-only, %d CSA (ratio 4), %d HCA (ratio 128); window %d, head %d, "
                  "indexer head %d\n",
                  count_ratio(s, 0), count_ratio(s, 4), count_ratio(s, 128), s.n_swa, s.head_dim,
                  s.indexer_head_dim);
    out += buf;
  }
  if (s.family == KvFamily::deepseek_v41) out += kv_bill_v41_text(s);
  std::snprintf(buf, sizeof buf, "  context: %" PRId64 " tokens, one sequence\n\n", n_ctx);
  out += buf;

  // header of the per-type columns (+ the reference's own types where known)
  const bool native = bill.has_native();
  auto header = [&](const char* first) {
    std::snprintf(buf, sizeof buf, "  %-52s %6s %6s %8s", first, "layers", "width", "rows");
    out += buf;
    for (KvType t : kAllKvTypes) {
      std::snprintf(buf, sizeof buf, " %11s", kv_type_name(t));
      out += buf;
    }
    if (native) out += "  native (reference storage)";
    out += "\n";
  };
  header("grows with context (bytes per token)");
  for (const auto& l : bill.lines) {
    if (l.ratio <= 0) continue;
    char rows[16];
    std::snprintf(rows, sizeof rows, "1/%d", l.ratio);
    std::snprintf(buf, sizeof buf, "  %-52s %6d %6" PRId64 " %8s", l.what.c_str(), l.n_layers, l.width, rows);
    out += buf;
    for (KvType t : kAllKvTypes) {
      std::snprintf(buf, sizeof buf, " %11.1f", l.bytes_per_token(t));
      out += buf;
    }
    if (native) {
      std::snprintf(buf, sizeof buf, "  %9.1f %s", l.bytes_per_token(l.native), kv_type_name(l.native));
      out += buf;
    }
    out += "\n";
  }
  std::snprintf(buf, sizeof buf, "  %-52s %6s %6s %8s", "total bytes per token", "", "", "");
  out += buf;
  for (KvType t : kAllKvTypes) {
    std::snprintf(buf, sizeof buf, " %11.1f", bill.bytes_per_token(t));
    out += buf;
  }
  if (native) {
    std::snprintf(buf, sizeof buf, "  %9.1f", bill.native_bytes_per_token());
    out += buf;
  }
  out += "\n\n";
  header("fixed per sequence (bytes)");
  for (const auto& l : bill.lines) {
    if (l.ratio > 0) continue;
    char rows[16];
    std::snprintf(rows, sizeof rows, "%" PRId64, l.fixed_rows);
    std::snprintf(buf, sizeof buf, "  %-52s %6d %6" PRId64 " %8s",
                  (l.what + (l.f32_state ? " [f32]" : "")).c_str(), l.n_layers, l.width, rows);
    out += buf;
    for (KvType t : kAllKvTypes) {
      std::snprintf(buf, sizeof buf, " %11s",
                    human_bytes(double(l.n_layers) * double(l.fixed_rows) * double(l.row_bytes(t))).c_str());
      out += buf;
    }
    if (native) {
      std::snprintf(
          buf, sizeof buf, "  %9s %s",
          human_bytes(double(l.n_layers) * double(l.fixed_rows) * double(l.row_bytes(l.native))).c_str(),
          kv_type_name(l.f32_state ? KvType::f32 : l.native));
      out += buf;
    }
    out += "\n";
  }
  std::snprintf(buf, sizeof buf, "  %-52s %6s %6s %8s", "total fixed", "", "", "");
  out += buf;
  for (KvType t : kAllKvTypes) {
    std::snprintf(buf, sizeof buf, " %11s", human_bytes(double(bill.fixed_bytes(t))).c_str());
    out += buf;
  }
  if (native) {
    std::snprintf(buf, sizeof buf, "  %9s", human_bytes(double(bill.native_fixed_bytes())).c_str());
    out += buf;
  }
  out += "\n\n";
  std::snprintf(buf, sizeof buf, "  %-52s %6s %6s %8s", "total for the context", "", "", "");
  out += buf;
  for (KvType t : kAllKvTypes) {
    std::snprintf(buf, sizeof buf, " %11s", human_bytes(double(bill.total_bytes(t, n_ctx))).c_str());
    out += buf;
  }
  if (native) {
    std::snprintf(buf, sizeof buf, "  %9s", human_bytes(double(bill.native_total_bytes(n_ctx))).c_str());
    out += buf;
  }
  out += "\n\n  KV types: f32 supported today; f16, bf16, q8_0, fp8_e4m3 (+UE8M0 per 32), mxfp4 planned.\n";
  out += "  Compressor state is always f32. Growing rows are counted as allocated (ceil(n_ctx/ratio)).\n";
  return out;
}

std::string kv_bill_json(const KvBill& bill, int64_t n_ctx) {
  using nlohmann::json;
  json j;
  j["arch"] = bill.spec.arch;
  j["source"] = bill.spec.source;
  j["n_layer"] = bill.spec.n_layer;
  j["n_ctx"] = n_ctx;
  json lines = json::array();
  for (const auto& l : bill.lines) {
    json jl;
    jl["name"] = l.name;
    jl["what"] = l.what;
    jl["layers"] = l.n_layers;
    jl["width"] = l.width;
    jl["ratio"] = l.ratio;
    jl["fixed_rows"] = l.fixed_rows;
    jl["f32_state"] = l.f32_state;
    if (l.has_native) {
      jl["native_type"] = kv_type_name(l.f32_state ? KvType::f32 : l.native);
      jl["native_bytes_per_token"] = l.bytes_per_token(l.native);
      jl["native_bytes_at_ctx"] = l.bytes(l.native, n_ctx);
    }
    for (KvType t : kAllKvTypes) {
      jl["bytes_per_token"][kv_type_name(t)] = l.bytes_per_token(t);
      jl["bytes_at_ctx"][kv_type_name(t)] = l.bytes(t, n_ctx);
    }
    lines.push_back(jl);
  }
  j["lines"] = lines;
  if (bill.has_native()) {
    j["native_bytes_per_token"] = bill.native_bytes_per_token();
    j["native_fixed_bytes"] = bill.native_fixed_bytes();
    j["native_total_bytes"] = bill.native_total_bytes(n_ctx);
  }
  if (bill.spec.family == KvFamily::deepseek_v41) {
    json layers = json::array();
    for (int l = 0; l < bill.spec.n_layer; ++l)
      layers.push_back(
          {{"layer", l},
           {"ratio", bill.spec.compress_ratios[static_cast<size_t>(l)]},
           {"mode", kv_layer_mode_name(bill.spec.layer_mode[static_cast<size_t>(l)])},
           {"kv_source", bill.spec.layer_kv_src[static_cast<size_t>(l)]},
           {"owns_compressed_kv", bill.spec.layer_mode[static_cast<size_t>(l)] == KvLayerMode::full},
           {"owns_index_keys", static_cast<bool>(bill.spec.layer_index_keys[static_cast<size_t>(l)])}});
    j["layers"] = layers;
    json eng = json::array();
    for (size_t k = 0; k < bill.spec.engram_layers.size(); ++k)
      eng.push_back({{"layer", bill.spec.engram_layers[k]},
                     {"rows", bill.spec.engram_rows[k]},
                     {"head_dim", bill.spec.engram_head_dim},
                     {"fp8_bytes",
                      static_cast<uint64_t>(bill.spec.engram_rows[k]) *
                          static_cast<uint64_t>(bill.spec.engram_head_dim + bill.spec.engram_head_dim / 32)},
                     {"rows_per_token", bill.spec.engram_cols}});
    j["engram_tables"] = eng;
  }
  for (KvType t : kAllKvTypes) {
    j["bytes_per_token"][kv_type_name(t)] = bill.bytes_per_token(t);
    j["fixed_bytes"][kv_type_name(t)] = bill.fixed_bytes(t);
    j["total_bytes"][kv_type_name(t)] = bill.total_bytes(t, n_ctx);
    j["supported"][kv_type_name(t)] = kv_type_supported(t);
  }
  return j.dump(2);
}

}  // namespace strata
