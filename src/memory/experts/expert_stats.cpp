#include "memory/experts/expert_stats.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace strata {

namespace {

void appendf(std::string& s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& s, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) s.append(buf, static_cast<size_t>(std::min<int>(n, sizeof buf - 1)));
}

std::string json_string(const std::string& v) {
  std::string o = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      appendf(o, "\\u%04x", c);
    } else {
      o += c;
    }
  }
  return o + "\"";
}

}  // namespace

double ExpertTotals::prefetch_precision() const {
  const uint64_t d = pred_true_pos + pred_false_pos;
  return d ? static_cast<double>(pred_true_pos) / d : 0.0;
}
double ExpertTotals::prefetch_recall() const {
  const uint64_t d = pred_true_pos + pred_false_neg;
  return d ? static_cast<double>(pred_true_pos) / d : 0.0;
}

ExpertTotals ExpertTotals::since(const ExpertTotals& e) const {
  ExpertTotals d = *this;
  d.tokens -= e.tokens;
  d.steps -= e.steps;
  d.hits -= e.hits;
  d.late -= e.late;
  d.misses -= e.misses;
  d.reads -= e.reads;
  d.bytes_read -= e.bytes_read;
  d.read_errors -= e.read_errors;
  d.stall_s -= e.stall_s;
  d.read_s -= e.read_s;
  d.evictions -= e.evictions;
  d.prefetch_issued -= e.prefetch_issued;
  d.prefetch_used -= e.prefetch_used;
  d.prefetch_wasted -= e.prefetch_wasted;
  d.prefetch_wasted_bytes -= e.prefetch_wasted_bytes;
  d.pred_true_pos -= e.pred_true_pos;
  d.pred_false_pos -= e.pred_false_pos;
  d.pred_false_neg -= e.pred_false_neg;
  d.io_submits -= e.io_submits;
  d.io_jobs -= e.io_jobs;
  return d;
}

void ExpertStats::init(int n_layer, int n_expert) {
  n_layer_ = n_layer;
  n_expert_ = n_expert;
  counts_.assign(static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert), 0);
  ring_.assign(kStepRing, ExpertStepStats{});
  n_steps_ = 0;
  decode_done_ = ExpertTotals{};
  totals_ = ExpertTotals{};
}

namespace {
void add_step(ExpertTotals& t, const ExpertStepStats& p) {
  t.steps++;
  t.tokens += p.n_tokens;
  t.hits += p.hits;
  t.late += p.late;
  t.misses += p.misses;
  t.bytes_read += p.bytes_read;
  t.stall_s += p.stall_s;
}
}  // namespace

ExpertStepStats& ExpertStats::begin_step(int64_t token0, int64_t n_tokens) {
  if (const ExpertStepStats* prev = current(); prev && prev->n_tokens == 1) add_step(decode_done_, *prev);
  ExpertStepStats& p = ring_[n_steps_++ % ring_.size()];
  p = ExpertStepStats{};
  p.token0 = token0;
  p.n_tokens = n_tokens;
  totals_.steps++;
  totals_.tokens += n_tokens;
  return p;
}

std::vector<ExpertStepStats> ExpertStats::steps() const {
  std::vector<ExpertStepStats> out;
  const uint64_t n = std::min<uint64_t>(n_steps_, ring_.size());
  out.reserve(static_cast<size_t>(n));
  for (uint64_t i = n_steps_ - n; i < n_steps_; ++i) out.push_back(ring_[i % ring_.size()]);
  return out;
}

ExpertTotals ExpertStats::decode_totals() const {
  ExpertTotals t = decode_done_;
  if (n_steps_ && ring_[(n_steps_ - 1) % ring_.size()].n_tokens == 1)
    add_step(t, ring_[(n_steps_ - 1) % ring_.size()]);
  return t;
}

std::string ExpertStats::to_json(const ExpertStoreInfo& i) const {
  const ExpertTotals& t = totals_;
  std::string s = "{\n  \"info\": {";
  appendf(s, "\"backing\": %s, \"policy\": %s, \"tier\": %s, ", json_string(i.backing_path).c_str(),
          json_string(i.policy).c_str(), json_string(i.tier).c_str());
  appendf(s, "\"direct_io\": %s, \"prefetch\": %s, \"resident\": %s, ", i.direct_io ? "true" : "false",
          i.prefetch ? "true" : "false", i.resident ? "true" : "false");
  appendf(s, "\"n_layer\": %d, \"n_expert\": %d, \"n_used\": %d, \"n_slots\": %d, ", i.n_layer, i.n_expert,
          i.n_used, i.n_slots);
  appendf(s,
          "\"slot_bytes\": %" PRIu64 ", \"budget_bytes\": %" PRIu64 ", \"expert_weights_resident\": %" PRIu64
          ", ",
          i.slot_bytes, i.budget_bytes, i.tier_bytes);
  appendf(s, "\"routed_bytes\": %" PRIu64 ", \"dense_weights\": %" PRIu64 ", ", i.routed_bytes,
          i.dense_bytes);
  appendf(s, "\"io_backend\": %s, \"expert_file\": %s, \"io_overhead_bytes\": %" PRIu64 ", ",
          json_string(i.io_backend).c_str(), json_string(i.expert_file).c_str(), i.io_overhead_bytes);
  appendf(s, "\"warm_experts\": %d, \"warm_bytes\": %" PRIu64 ", \"warm_seconds\": %.6f, ", i.warm_experts,
          i.warm_bytes, i.warm_seconds);
  appendf(s, "\"io_threads\": %d, \"io_depth\": %d, \"lookahead\": %d},\n", i.io_threads, i.io_depth,
          i.lookahead);
  s += "  \"totals\": {";
  appendf(s,
          "\"tokens\": %" PRId64 ", \"steps\": %" PRId64 ", \"hits\": %" PRIu64 ", \"late\": %" PRIu64
          ", \"misses\": %" PRIu64 ", \"hit_rate\": %.6f, ",
          t.tokens, t.steps, t.hits, t.late, t.misses, t.hit_rate());
  appendf(s,
          "\"reads\": %" PRIu64 ", \"bytes_read\": %" PRIu64 ", \"read_errors\": %" PRIu64
          ", \"stall_ms\": %.3f, \"stall_ms_per_token\": %.4f, \"read_ms\": %.3f, ",
          t.reads, t.bytes_read, t.read_errors, t.stall_s * 1e3, t.tokens ? t.stall_s * 1e3 / t.tokens : 0.0,
          t.read_s * 1e3);
  appendf(s,
          "\"evictions\": %" PRIu64 ", \"prefetch_issued\": %" PRIu64 ", \"prefetch_used\": %" PRIu64
          ", \"prefetch_wasted\": %" PRIu64 ", \"prefetch_wasted_bytes\": %" PRIu64 ", ",
          t.evictions, t.prefetch_issued, t.prefetch_used, t.prefetch_wasted, t.prefetch_wasted_bytes);
  appendf(s, "\"io_submits\": %" PRIu64 ", \"io_jobs\": %" PRIu64 ", ", t.io_submits, t.io_jobs);
  appendf(s, "\"prefetch_precision\": %.6f, \"prefetch_recall\": %.6f},\n", t.prefetch_precision(),
          t.prefetch_recall());
  const ExpertTotals d = decode_totals();
  appendf(s,
          "  \"decode\": {\"tokens\": %" PRId64 ", \"hits\": %" PRIu64 ", \"late\": %" PRIu64
          ", \"misses\": %" PRIu64 ", \"hit_rate\": %.6f, \"bytes_read\": %" PRIu64
          ", \"stall_ms_per_token\": %.4f},\n",
          d.tokens, d.hits, d.late, d.misses, d.hit_rate(), d.bytes_read,
          d.tokens ? d.stall_s * 1e3 / d.tokens : 0.0);
  appendf(s, "  \"steps_dropped\": %" PRIu64 ",\n", steps_dropped());
  s += "  \"steps\": [";
  const std::vector<ExpertStepStats> steps = this->steps();
  for (size_t k = 0; k < steps.size(); ++k) {
    const ExpertStepStats& p = steps[k];
    appendf(s,
            "%s\n    {\"token0\": %" PRId64 ", \"n_tokens\": %" PRId64
            ", \"hits\": %u, \"late\": %u, \"misses\": %u, "
            "\"bytes_read\": %" PRIu64 ", \"stall_ms\": %.4f}",
            k ? "," : "", p.token0, p.n_tokens, p.hits, p.late, p.misses, p.bytes_read, p.stall_s * 1e3);
  }
  s += "\n  ],\n  \"activations\": [";
  for (int l = 0; l < n_layer_; ++l) {
    s += l ? ",\n    [" : "\n    [";
    for (int e = 0; e < n_expert_; ++e) appendf(s, "%s%" PRIu64, e ? ", " : "", activation(l, e));
    s += "]";
  }
  s += "\n  ]\n}\n";
  return s;
}

std::string ExpertStats::to_csv() const {
  std::string s = "layer,expert,count\n";
  for (int l = 0; l < n_layer_; ++l)
    for (int e = 0; e < n_expert_; ++e) appendf(s, "%d,%d,%" PRIu64 "\n", l, e, activation(l, e));
  return s;
}

Status ExpertStats::write(const std::string& path, const ExpertStoreInfo& info) const {
  const bool csv = path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
  return write_text_file(path, csv ? to_csv() : to_json(info));
}

Result<std::vector<ExpertKey>> expert_profile_load(const std::string& path, int n_layer, int n_expert,
                                                   std::vector<uint64_t>* counts) {
  std::ifstream in(path);
  if (!in) return err("expert profile '%s': cannot open: %s", path.c_str(), std::strerror(errno));
  struct Row {
    ExpertKey k;
    uint64_t n;
  };
  std::vector<Row> rows;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "layer,expert,count") continue;
    long long l = -1, e = -1;
    unsigned long long n = 0;
    char extra = 0;
    if (std::sscanf(line.c_str(), "%lld,%lld,%llu%c", &l, &e, &n, &extra) != 3)
      return err("expert profile '%s': line %d: expected 'layer,expert,count', got '%s'", path.c_str(),
                 line_no, line.substr(0, 80).c_str());
    if (l < 0 || l >= n_layer || e < 0 || e >= n_expert)
      return err(
          "expert profile '%s': line %d: (layer %lld, expert %lld) is outside the model (%d layers, %d "
          "experts)",
          path.c_str(), line_no, l, e, n_layer, n_expert);
    if (n > 0) rows.push_back({{static_cast<int32_t>(l), static_cast<int32_t>(e)}, n});
    if (counts) (*counts)[static_cast<size_t>(l * n_expert + e)] += n;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.n != b.n) return a.n > b.n;
    return a.k.layer != b.k.layer ? a.k.layer < b.k.layer : a.k.expert < b.k.expert;
  });
  std::vector<ExpertKey> keys;
  keys.reserve(rows.size());
  for (const Row& r : rows) keys.push_back(r.k);
  return keys;
}

}  // namespace strata
