#include "runtime/auto_promote.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "quant/weight_quant.h"
#include "quantize/class_policy.h"

namespace strata {
namespace {

double bits_per_weight(GgmlType t) {
  const TypeInfo& ti = type_info(t);
  return static_cast<double>(ti.type_size) * 8.0 / static_cast<double>(ti.block_size);
}

int layer_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

double mib(uint64_t b) {
  return static_cast<double>(b) / (1024.0 * 1024.0);
}

// The units the requested plan leaves narrower than `to` (see the header).
std::vector<PromoteUnit> find_units(const QuantizePlan& plan, GgmlType to, bool by_class) {
  const double to_bits = bits_per_weight(to);
  struct Acc {
    bool narrower = false, wider = false;
  };
  std::map<std::pair<int, std::string>, Acc> acc;  // (layer, class), ordered by layer
  for (const TensorPlan& tp : plan.tensors) {
    const std::string cls = tensor_class(tp.src->name);
    if (cls.empty() || cls == "router") continue;
    const int layer = layer_of(tp.src->name);
    if ((layer < 0) != (cls == "embd" || cls == "output")) continue;  // a layer's classes carry blk.L.
    Acc& a = acc[{layer, cls}];
    const double b = bits_per_weight(tp.choice.type);
    a.narrower = a.narrower || b < to_bits;
    a.wider = a.wider || b > to_bits;
  }
  std::vector<PromoteUnit> units;
  for (const auto& [key, a] : acc) {
    if (!a.narrower || a.wider) continue;  // never demote a tensor the file type made wider
    const auto& [layer, cls] = key;
    std::string name = layer >= 0 ? "layer " + std::to_string(layer) : cls;
    if (by_class && layer >= 0) name += " " + cls;
    if (units.empty() || units.back().name != name) units.push_back({name, layer, {}, 0});
    units.back().classes.push_back(cls);
  }
  return units;
}

// The user's class rules, then one `layers[...].CLASS=TYPE` rule per promoted class (and
// `embd=TYPE` / `output=TYPE`).
std::vector<ClassRule> promotion_rules(const std::vector<ClassRule>& base,
                                       const std::vector<PromoteUnit>& units,
                                       const std::vector<bool>& promoted, GgmlType to) {
  std::vector<ClassRule> rules = base;
  std::map<std::string, std::vector<int>> layers_of;
  std::vector<std::string> order;  // classes in first-seen order (stable output)
  for (size_t u = 0; u < units.size(); ++u) {
    if (!promoted[u]) continue;
    for (const std::string& cls : units[u].classes) {
      if (units[u].layer < 0) {
        rules.push_back({{}, cls, to});
        continue;
      }
      if (!layers_of.count(cls)) order.push_back(cls);
      layers_of[cls].push_back(units[u].layer);
    }
  }
  for (const std::string& cls : order) {
    std::vector<int>& l = layers_of[cls];
    std::sort(l.begin(), l.end());
    rules.push_back({l, cls, to});
  }
  return rules;
}

std::string policy_string(const std::vector<ClassRule>& rules) {
  std::string s;
  for (const ClassRule& r : rules) {
    if (!s.empty()) s += ",";
    if (!r.layers.empty()) {
      s += "layers[";
      for (size_t i = 0; i < r.layers.size(); ++i) s += (i ? "," : "") + std::to_string(r.layers[i]);
      s += "].";
    }
    s += r.cls + "=" + type_name(r.type);
  }
  return s;
}

std::string describe(const KldResult& r, uint64_t bytes, uint64_t n_el) {
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "%.3f MiB (%.3f bpw), mean KLD %.6f", mib(bytes),
                        static_cast<double>(bytes) * 8.0 / static_cast<double>(n_el), r.kld_mean);
  double lo = 2;
  size_t at = 0;
  for (size_t l = 0; l < r.routing.size(); ++l) {
    if (r.routing[l] >= 0 && r.routing[l] < lo) {
      lo = r.routing[l];
      at = l;
    }
  }
  if (lo <= 1 && n > 0 && static_cast<size_t>(n) < sizeof buf)
    std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), ", routing min %.4f (layer %zu)", lo, at);
  return buf;
}

// Removes the scratch file (and the writer's .tmp) unless it became OUT.
struct ScratchGuard {
  std::string path;
  ~ScratchGuard() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    std::filesystem::remove(path + ".tmp", ec);
  }
};

}  // namespace

double gate_excess(const KldResult& r, double gate_kld, double gate_routing) {
  double e = 0;
  if (gate_kld >= 0) e = std::max(e, r.kld_mean / std::max(gate_kld, 1e-300));
  if (gate_routing >= 0) {
    for (double v : r.routing) {
      if (v >= 0) e = std::max(e, (1.0 - v) / std::max(1.0 - gate_routing, 1e-300));
    }
  }
  return e;
}

Result<AutoPromoteResult> auto_promote(const GgufFile& in, const std::string& in_path,
                                       const QuantizeOptions& base, std::string_view text,
                                       const AutoPromoteOptions& opts, const std::string& out_path,
                                       const PromoteLog& log) {
  if (opts.gate_kld < 0 && opts.gate_routing < 0)
    return err("--auto-promote needs a gate (kld=X and/or routing=Y)");
  if (!weight_quantizer(opts.promote_type))
    return err("--promote-type %s: strata cannot write that type", type_name(opts.promote_type));
  STRATA_ASSIGN(const QuantizePlan requested, plan_quantize(in, base));
  std::vector<PromoteUnit> units = find_units(requested, opts.promote_type, opts.by_class);

  RoutingCapture cr;
  LoadOptions lr;
  lr.n_threads = opts.n_threads;
  cr.attach(&lr);
  STRATA_ASSIGN(auto ref, Model::load(in_path, lr));
  if (!ref->has_tokenizer()) return err("--auto-promote: %s has no tokenizer", in_path.c_str());
  const std::vector<int32_t> ids =
      ref->tokenizer().encode(text, /*add_special=*/false, /*parse_special=*/false);

  const ScratchGuard scratch{out_path + ".promote"};
  struct Measured {
    KldResult r;
    uint64_t bytes = 0, n_el = 0;
    double excess = 0;
    bool pass = false;
  };
  // Writes the mix with `promoted` units promoted to the scratch file and measures it; a mix
  // measured before (the greedy search meets the sensitivity runs' and the all-promoted mixes) is
  // only written again.
  std::map<std::vector<bool>, Measured> seen;
  auto measure = [&](const std::vector<bool>& promoted) -> Result<Measured> {
    QuantizeOptions o = base;
    o.policy.class_rules = promotion_rules(base.policy.class_rules, units, promoted, opts.promote_type);
    STRATA_ASSIGN(const QuantizePlan plan, plan_quantize(in, o));
    STRATA_TRY(write_quantized(in, plan, o, scratch.path));
    if (auto it = seen.find(promoted); it != seen.end()) return it->second;
    RoutingCapture cq;
    LoadOptions lq;
    lq.n_threads = opts.n_threads;
    cq.attach(&lq);
    STRATA_ASSIGN(auto quant, Model::load(scratch.path, lq));
    Measured m;
    STRATA_ASSIGN(m.r, kl_divergence(*quant, *ref, ids, opts.kld, &cq, &cr));
    m.bytes = plan.out_bytes;
    m.n_el = plan.n_elements;
    m.excess = gate_excess(m.r, opts.gate_kld, opts.gate_routing);
    m.pass = kld_gate(m.r, opts.gate_kld, opts.gate_routing).ok();
    seen[promoted] = m;
    return m;
  };
  auto finish = [&](const Measured& m, const std::vector<bool>& promoted,
                    std::vector<PromoteUnit> order) -> Result<AutoPromoteResult> {
    std::error_code ec;
    std::filesystem::rename(scratch.path, out_path, ec);
    if (ec)
      return err("cannot rename %s to %s: %s", scratch.path.c_str(), out_path.c_str(), ec.message().c_str());
    AutoPromoteResult res;
    res.promoted = std::move(order);
    res.policy = policy_string(promotion_rules(base.policy.class_rules, units, promoted, opts.promote_type));
    res.out_bytes = m.bytes;
    res.n_elements = m.n_el;
    res.measured = m.r;
    return res;
  };
  auto unit_list = [&]() {
    std::string s;
    for (const PromoteUnit& u : units) {
      s += (s.empty() ? "" : ", ") + u.name + " (";
      for (size_t i = 0; i < u.classes.size(); ++i) s += (i ? "," : "") + u.classes[i];
      s += ")";
    }
    return s;
  };

  std::vector<bool> none(units.size(), false), all(units.size(), true);
  STRATA_ASSIGN(const Measured low, measure(none));
  log("requested mix: " + describe(low.r, low.bytes, low.n_el) + (low.pass ? ": passes" : ": fails"));
  if (low.pass) return finish(low, none, {});
  if (units.empty())
    return err("gate failed with nothing to promote: every tensor is already %s or wider (%s)",
               type_name(opts.promote_type),
               kld_gate(low.r, opts.gate_kld, opts.gate_routing).message().c_str());
  log("units below " + std::string(type_name(opts.promote_type)) + ": " + unit_list());
  STRATA_ASSIGN(const Measured high, measure(all));
  log("all promoted to " + std::string(type_name(opts.promote_type)) + ": " +
      describe(high.r, high.bytes, high.n_el) + (high.pass ? ": passes" : ": fails"));
  if (!high.pass)
    return err("even with every layer promoted to %s the %s", type_name(opts.promote_type),
               kld_gate(high.r, opts.gate_kld, opts.gate_routing).message().c_str());

  // Sensitivity: only unit u at the requested types, every other unit promoted.
  for (size_t u = 0; u < units.size(); ++u) {
    std::vector<bool> promoted = all;
    promoted[u] = false;
    STRATA_ASSIGN(const Measured m, measure(promoted));
    units[u].sensitivity = m.excess;
    char buf[64];
    std::snprintf(buf, sizeof buf, ", gate excess %.3f", m.excess);
    log("sensitivity of " + units[u].name + ": " + describe(m.r, m.bytes, m.n_el) + buf);
  }
  std::vector<size_t> rank(units.size());
  for (size_t u = 0; u < rank.size(); ++u) rank[u] = u;
  std::stable_sort(rank.begin(), rank.end(),
                   [&](size_t a, size_t b) { return units[a].sensitivity > units[b].sensitivity; });

  std::vector<bool> promoted = none;
  std::vector<PromoteUnit> order;
  for (size_t step = 0; step < rank.size(); ++step) {
    promoted[rank[step]] = true;
    order.push_back(units[rank[step]]);
    STRATA_ASSIGN(const Measured m, measure(promoted));
    log("step " + std::to_string(step + 1) + ": promote " + units[rank[step]].name + " -> " +
        describe(m.r, m.bytes, m.n_el) + (m.pass ? ": passes" : ": fails"));
    if (m.pass) return finish(m, promoted, order);
  }
  return err("auto-promote: the gate failed at every step");  // unreachable: all promoted passes
}

}  // namespace strata
