// Routing trace JSONL reader and writer (routing_trace.h).
#include "memory/experts/routing_trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace strata {

namespace {

using json = nlohmann::json;

Result<int64_t> get_int(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return err("%s: missing key \"%s\"", where.c_str(), key);
  if (!it->is_number_integer()) return err("%s: \"%s\" must be an integer", where.c_str(), key);
  return it->get<int64_t>();
}

Status parse_header(const json& j, const std::string& where, RoutingTraceMeta* m) {
  STRATA_ASSIGN(int64_t v, get_int(j, "strata_routing_trace", where));
  if (v != 1)
    return err("%s: routing trace version %lld is not supported (expected 1)", where.c_str(), (long long)v);
  STRATA_ASSIGN(int64_t nl, get_int(j, "n_layers", where));
  STRATA_ASSIGN(int64_t ne, get_int(j, "n_experts", where));
  int64_t k = 0;
  if (j.contains("top_k")) {
    STRATA_ASSIGN(k, get_int(j, "top_k", where));
  }
  if (nl <= 0 || nl > (1 << 20) || ne <= 0 || ne > (1 << 20) || k < 0 || k > ne)
    return err("%s: header n_layers %lld, n_experts %lld, top_k %lld out of range", where.c_str(),
               (long long)nl, (long long)ne, (long long)k);
  m->n_layers = static_cast<int>(nl);
  m->n_experts = static_cast<int>(ne);
  m->top_k = static_cast<int>(k);
  return {};
}

Status parse_record(const json& j, const std::string& where, const RoutingTraceMeta& m, RoutingRecord* r) {
  STRATA_ASSIGN(r->token_idx, get_int(j, "token_idx", where));
  STRATA_ASSIGN(int64_t layer, get_int(j, "layer", where));
  if (r->token_idx < 0) return err("%s: token_idx %lld is negative", where.c_str(), (long long)r->token_idx);
  if (layer < 0 || layer >= (m.n_layers > 0 ? m.n_layers : (1 << 20)))
    return err("%s: layer %lld is out of range [0, %d)", where.c_str(), (long long)layer,
               m.n_layers > 0 ? m.n_layers : (1 << 20));
  r->layer = static_cast<int32_t>(layer);
  auto ex = j.find("experts");
  if (ex == j.end() || !ex->is_array())
    return err("%s: \"experts\" must be an array of expert ids", where.c_str());
  if (ex->empty()) return err("%s: \"experts\" is empty", where.c_str());
  const int64_t lim = m.n_experts > 0 ? m.n_experts : (1 << 20);
  r->experts.clear();
  for (const json& e : *ex) {
    if (!e.is_number_integer()) return err("%s: \"experts\" holds a non-integer", where.c_str());
    const int64_t id = e.get<int64_t>();
    if (id < 0 || id >= lim)
      return err("%s: expert %lld is out of range [0, %lld)", where.c_str(), (long long)id, (long long)lim);
    if (std::find(r->experts.begin(), r->experts.end(), id) != r->experts.end())
      return err("%s: expert %lld appears twice", where.c_str(), (long long)id);
    r->experts.push_back(static_cast<int32_t>(id));
  }
  r->weights.clear();
  if (auto w = j.find("weights"); w != j.end() && !w->is_null() && !(w->is_array() && w->empty())) {
    if (!w->is_array() || w->size() != r->experts.size())
      return err("%s: \"weights\" must be an array of %zu numbers (one per expert)", where.c_str(),
                 r->experts.size());
    for (const json& x : *w) {
      if (!x.is_number()) return err("%s: \"weights\" holds a non-number", where.c_str());
      r->weights.push_back(x.get<float>());
    }
  }
  r->lookahead.clear();
  if (auto la = j.find("lookahead"); la != j.end()) {
    if (!la->is_array()) return err("%s: \"lookahead\" must be an array of expert-id arrays", where.c_str());
    for (const json& d : *la) {
      if (!d.is_array()) return err("%s: \"lookahead\" must be an array of expert-id arrays", where.c_str());
      r->lookahead.emplace_back();
      for (const json& e : d) {
        if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= lim)
          return err("%s: \"lookahead\" holds an expert id out of range [0, %lld)", where.c_str(),
                     (long long)lim);
        r->lookahead.back().push_back(e.get<int32_t>());
      }
    }
  }
  return {};
}

}  // namespace

Result<RoutingTrace> routing_trace_parse(const std::string& text, const std::string& source) {
  RoutingTrace t;
  size_t pos = 0;
  int64_t line_no = 0, last_token = -1;
  bool header_allowed = true, out_of_order = false;
  int max_layer = -1, max_expert = -1, max_k = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    if (line.empty()) continue;
    const std::string where = source + ":" + std::to_string(line_no);
    json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return err("%s: not a JSON object", where.c_str());
    if (j.contains("strata_routing_trace")) {
      if (!header_allowed) return err("%s: the header line must come first", where.c_str());
      STRATA_TRY(parse_header(j, where, &t.meta));
      header_allowed = false;
      continue;
    }
    header_allowed = false;
    RoutingRecord r;
    STRATA_TRY(parse_record(j, where, t.meta, &r));
    if (r.token_idx < last_token) out_of_order = true;
    if (t.meta.top_k > 0 && static_cast<int>(r.experts.size()) > t.meta.top_k)
      return err("%s: %zu experts, more than top_k %d", where.c_str(), r.experts.size(), t.meta.top_k);
    last_token = r.token_idx;
    max_layer = std::max(max_layer, r.layer);
    for (int32_t e : r.experts) max_expert = std::max(max_expert, e);
    max_k = std::max(max_k, static_cast<int>(r.experts.size()));
    t.records.push_back(std::move(r));
  }
  if (t.records.empty()) return err("%s: no routing records", source.c_str());
  // A prefill step routes layer by layer over all its tokens, so its lines come layer-major;
  // replay wants token order (each token's layers in order), which a stable sort restores.
  if (out_of_order)
    std::stable_sort(t.records.begin(), t.records.end(), [](const RoutingRecord& a, const RoutingRecord& b) {
      return a.token_idx < b.token_idx;
    });
  if (t.meta.n_layers == 0) t.meta.n_layers = max_layer + 1;
  if (t.meta.n_experts == 0) t.meta.n_experts = max_expert + 1;
  if (t.meta.top_k == 0) t.meta.top_k = max_k;
  return t;
}

Result<RoutingTrace> routing_trace_read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return err("cannot open routing trace %s: %s", path.c_str(), std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return err("reading routing trace %s failed", path.c_str());
  return routing_trace_parse(ss.str(), path);
}

std::vector<std::vector<uint64_t>> routing_trace_counts(const RoutingTrace& t) {
  std::vector<std::vector<uint64_t>> c(static_cast<size_t>(t.meta.n_layers),
                                       std::vector<uint64_t>(static_cast<size_t>(t.meta.n_experts), 0));
  for (const RoutingRecord& r : t.records)
    for (int32_t e : r.experts) ++c[r.layer][e];
  return c;
}

Result<std::unique_ptr<RoutingTraceWriter>> RoutingTraceWriter::open(const std::string& path,
                                                                     const RoutingTraceMeta& meta) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return err("cannot create routing trace %s: %s", path.c_str(), std::strerror(errno));
  std::unique_ptr<RoutingTraceWriter> w(new RoutingTraceWriter());
  w->path_ = path;
  w->f_ = f;
  if (meta.n_layers > 0 && meta.n_experts > 0) {
    std::fprintf(f, "{\"strata_routing_trace\":1,\"n_layers\":%d,\"n_experts\":%d,\"top_k\":%d}\n",
                 meta.n_layers, meta.n_experts, meta.top_k);
  }
  return w;
}

RoutingTraceWriter::~RoutingTraceWriter() {
  if (f_) std::fclose(f_);
}

Status RoutingTraceWriter::write(int64_t token_idx, int layer, std::span<const int32_t> experts,
                                 std::span<const float> weights) {
  if (!f_) return err("routing trace %s: write after close", path_.c_str());
  if (!weights.empty() && weights.size() != experts.size())
    return err("routing trace %s: %zu weights for %zu experts", path_.c_str(), weights.size(),
               experts.size());
  // Each field is printed straight to the stdio buffer: no allocation per line.
  std::fprintf(f_, "{\"token_idx\":%lld,\"layer\":%d,\"experts\":[", static_cast<long long>(token_idx),
               layer);
  for (size_t i = 0; i < experts.size(); ++i) std::fprintf(f_, i ? ",%d" : "%d", experts[i]);
  std::fputs("],\"weights\":[", f_);
  for (size_t i = 0; i < weights.size(); ++i) {
    const float w = std::isfinite(weights[i]) ? weights[i] : 0.0f;  // JSON has no NaN/inf
    std::fprintf(f_, i ? ",%.6g" : "%.6g", static_cast<double>(w));
  }
  std::fputs("]}\n", f_);
  if (std::ferror(f_)) return err("writing routing trace %s failed: %s", path_.c_str(), std::strerror(errno));
  return {};
}

Status RoutingTraceWriter::close() {
  if (!f_) return {};
  const bool bad = std::fflush(f_) != 0 || std::ferror(f_);
  const int e = errno;
  const bool close_bad = std::fclose(f_) != 0;
  f_ = nullptr;
  if (bad || close_bad) return err("writing routing trace %s failed: %s", path_.c_str(), std::strerror(e));
  return {};
}

}  // namespace strata
