#include "plan/kv_bill.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace strata {

uint64_t KvBillLine::bytes(KvType t, int64_t n_ctx, int64_t n_batch) const {
  return static_cast<uint64_t>(n_layers) * part.bytes(t, n_ctx, n_batch);
}

double KvBillLine::bytes_per_token(KvType t) const {
  return static_cast<double>(n_layers) * part.bytes_per_token(t);
}

namespace {

// Bytes of the bill's lines (only the fixed ones when fixed_only), each at type_of(line).
template <class TypeOf>
uint64_t sum_bytes(const std::vector<KvBillLine>& lines, bool fixed_only, int64_t n_ctx, int64_t n_batch,
                   TypeOf type_of) {
  uint64_t s = 0;
  for (const auto& l : lines)
    if (!fixed_only || !l.grows()) s += l.bytes(type_of(l), n_ctx, n_batch);
  return s;
}

template <class TypeOf>
double sum_per_token(const std::vector<KvBillLine>& lines, TypeOf type_of) {
  double s = 0;
  for (const auto& l : lines) s += l.bytes_per_token(type_of(l));
  return s;
}

KvType native_of(const KvBillLine& l) {
  return l.native();
}

}  // namespace

double KvBill::bytes_per_token(KvType t) const {
  return sum_per_token(lines, [t](const KvBillLine&) { return t; });
}

uint64_t KvBill::fixed_bytes(KvType t, int64_t n_ctx, int64_t n_batch) const {
  return sum_bytes(lines, true, n_ctx, n_batch, [t](const KvBillLine&) { return t; });
}

uint64_t KvBill::total_bytes(KvType t, int64_t n_ctx, int64_t n_batch) const {
  return sum_bytes(lines, false, n_ctx, n_batch, [t](const KvBillLine&) { return t; });
}

bool KvBill::has_native() const {
  for (const auto& l : lines)
    if (l.part.has_native) return true;
  return false;
}

double KvBill::native_bytes_per_token() const {
  return sum_per_token(lines, native_of);
}

uint64_t KvBill::native_fixed_bytes(int64_t n_ctx, int64_t n_batch) const {
  return sum_bytes(lines, true, n_ctx, n_batch, native_of);
}

uint64_t KvBill::native_total_bytes(int64_t n_ctx, int64_t n_batch) const {
  return sum_bytes(lines, false, n_ctx, n_batch, native_of);
}

static int count_ratio(const KvModelSpec& s, int r) {
  return static_cast<int>(std::count(s.compress_ratios.begin(), s.compress_ratios.end(), r));
}

KvBill kv_bill_make(const KvModelSpec& spec) {
  KvBill b;
  b.spec = spec;
  for (const KvLayerSpec& layer : spec.kv.layers)
    for (const KvPartSpec& p : layer.parts) {
      auto it =
          std::find_if(b.lines.begin(), b.lines.end(), [&](const KvBillLine& l) { return l.part == p; });
      if (it != b.lines.end())
        ++it->n_layers;
      else
        b.lines.push_back(KvBillLine{p, 1});
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

std::string kv_bill_text(const KvBill& bill, int64_t n_ctx, int64_t n_batch) {
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
  std::snprintf(buf, sizeof buf,
                "  context: %" PRId64 " tokens, one sequence, steps of up to %" PRId64 " tokens\n\n", n_ctx,
                n_batch);
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
    if (!l.grows()) continue;
    char rows[16];
    std::snprintf(rows, sizeof rows, "1/%d", l.part.ratio);
    std::snprintf(buf, sizeof buf, "  %-52s %6d %6" PRId64 " %8s", l.what().c_str(), l.n_layers, l.part.width,
                  rows);
    out += buf;
    for (KvType t : kAllKvTypes) {
      std::snprintf(buf, sizeof buf, " %11.1f", l.bytes_per_token(t));
      out += buf;
    }
    if (native) {
      std::snprintf(buf, sizeof buf, "  %9.1f %s", l.bytes_per_token(l.native()), kv_type_name(l.native()));
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
    if (l.grows()) continue;
    char rows[16];
    std::snprintf(rows, sizeof rows, "%" PRId64, l.rows(n_ctx, n_batch));
    const bool f32_state = l.part.kind == KvPartKind::state;
    std::snprintf(buf, sizeof buf, "  %-52s %6d %6" PRId64 " %8s",
                  (l.what() + (f32_state ? " [f32]" : "")).c_str(), l.n_layers, l.part.width, rows);
    out += buf;
    for (KvType t : kAllKvTypes) {
      std::snprintf(buf, sizeof buf, " %11s", human_bytes(double(l.bytes(t, n_ctx, n_batch))).c_str());
      out += buf;
    }
    if (native) {
      std::snprintf(buf, sizeof buf, "  %9s %s",
                    human_bytes(double(l.bytes(l.native(), n_ctx, n_batch))).c_str(),
                    kv_type_name(l.part.stored_as(l.native())));
      out += buf;
    }
    out += "\n";
  }
  std::snprintf(buf, sizeof buf, "  %-52s %6s %6s %8s", "total fixed", "", "", "");
  out += buf;
  for (KvType t : kAllKvTypes) {
    std::snprintf(buf, sizeof buf, " %11s", human_bytes(double(bill.fixed_bytes(t, n_ctx, n_batch))).c_str());
    out += buf;
  }
  if (native) {
    std::snprintf(buf, sizeof buf, "  %9s",
                  human_bytes(double(bill.native_fixed_bytes(n_ctx, n_batch))).c_str());
    out += buf;
  }
  out += "\n\n";
  std::snprintf(buf, sizeof buf, "  %-52s %6s %6s %8s", "total for the context", "", "", "");
  out += buf;
  for (KvType t : kAllKvTypes) {
    std::snprintf(buf, sizeof buf, " %11s", human_bytes(double(bill.total_bytes(t, n_ctx, n_batch))).c_str());
    out += buf;
  }
  if (native) {
    std::snprintf(buf, sizeof buf, "  %9s",
                  human_bytes(double(bill.native_total_bytes(n_ctx, n_batch))).c_str());
    out += buf;
  }
  out +=
      "\n\n  KV types: " + kv_supported_names() +
      " (fp8_e4m3: E4M3 + UE8M0 per 32); `strata plan` bills each part at -ctk / -ctv / --kv-type-index.\n";
  out += "  Compressor state is always f32. Rows are counted as allocated (kv/kv_spec.h): growing parts\n";
  out += "  ceil(n_ctx/ratio), window rings min(n_ctx, window - 1 + step tokens).\n";
  return out;
}

std::string kv_bill_json(const KvBill& bill, int64_t n_ctx, int64_t n_batch) {
  using nlohmann::json;
  json j;
  j["arch"] = bill.spec.arch;
  j["source"] = bill.spec.source;
  j["n_layer"] = bill.spec.n_layer;
  j["n_ctx"] = n_ctx;
  j["n_batch"] = n_batch;
  json lines = json::array();
  for (const auto& l : bill.lines) {
    json jl;
    jl["name"] = l.name();
    jl["what"] = l.what();
    jl["layers"] = l.n_layers;
    jl["kind"] = kv_part_kind_name(l.part.kind);
    jl["width"] = l.part.width;
    jl["ratio"] = l.grows() ? l.part.ratio : 0;
    jl["rows"] = l.rows(n_ctx, n_batch);
    jl["f32_state"] = l.part.kind == KvPartKind::state;
    if (l.part.has_native) {
      jl["native_type"] = kv_type_name(l.part.stored_as(l.native()));
      jl["native_bytes_per_token"] = l.bytes_per_token(l.native());
      jl["native_bytes_at_ctx"] = l.bytes(l.native(), n_ctx, n_batch);
    }
    for (KvType t : kAllKvTypes) {
      jl["bytes_per_token"][kv_type_name(t)] = l.bytes_per_token(t);
      jl["bytes_at_ctx"][kv_type_name(t)] = l.bytes(t, n_ctx, n_batch);
    }
    lines.push_back(jl);
  }
  j["lines"] = lines;
  if (bill.has_native()) {
    j["native_bytes_per_token"] = bill.native_bytes_per_token();
    j["native_fixed_bytes"] = bill.native_fixed_bytes(n_ctx, n_batch);
    j["native_total_bytes"] = bill.native_total_bytes(n_ctx, n_batch);
  }
  if (bill.spec.family == KvFamily::deepseek_v41) {
    json layers = json::array();
    for (int l = 0; l < bill.spec.n_layer; ++l)
      layers.push_back(
          {{"layer", l},
           {"ratio", bill.spec.compress_ratios[static_cast<size_t>(l)]},
           {"mode", v41::layer_mode_name(bill.spec.layer_mode[static_cast<size_t>(l)])},
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
    j["fixed_bytes"][kv_type_name(t)] = bill.fixed_bytes(t, n_ctx, n_batch);
    j["total_bytes"][kv_type_name(t)] = bill.total_bytes(t, n_ctx, n_batch);
    j["supported"][kv_type_name(t)] = kv_type_supported(t);
  }
  return j.dump(2);
}

}  // namespace strata
