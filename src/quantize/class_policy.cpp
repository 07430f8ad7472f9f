#include "quantize/class_policy.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace strata {
namespace {

constexpr const char* kClasses[] = {"router", "attn", "experts", "shexp", "ffn", "embd", "output"};

bool has(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Splits on commas outside [...].
std::vector<std::string> split_rules(const std::string& spec) {
  std::vector<std::string> out(1);
  int depth = 0;
  for (char ch : spec) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch == ',' && depth == 0) {
      out.emplace_back();
    } else {
      out.back() += ch;
    }
  }
  return out;
}

Result<int> parse_int(const std::string& s, const std::string& rule) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < -(1 << 20) || v > (1 << 20))
    return err("--policy rule '%s': '%s' is not a layer number", rule.c_str(), s.c_str());
  return static_cast<int>(v);
}

Result<std::vector<int>> parse_layers(const std::string& list, const std::string& rule) {
  std::vector<int> layers;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t end = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, end - pos);
    const size_t dots = item.find("..");
    if (dots == std::string::npos) {
      STRATA_ASSIGN(const int l, parse_int(item, rule));
      layers.push_back(l);
    } else {
      STRATA_ASSIGN(const int a, parse_int(item.substr(0, dots), rule));
      STRATA_ASSIGN(const int b, parse_int(item.substr(dots + 2), rule));
      if (a < 0 || b < a || b - a > 4096)
        return err("--policy rule '%s': range '%s' must be a..b with 0 <= a <= b", rule.c_str(),
                   item.c_str());
      for (int l = a; l <= b; ++l) layers.push_back(l);
    }
    pos = end + 1;
  }
  return layers;
}

std::string expand_presets(const std::string& spec) {
  if (spec == "fp4-experts")
    return "attn=q8_0,shexp=q8_0,ffn=q8_0,embd=q8_0,output=q8_0,experts=mxfp4,router=f32";
  if (spec == "fp4-all")
    return "attn=mxfp4,shexp=mxfp4,ffn=mxfp4,embd=mxfp4,output=mxfp4,experts=mxfp4,router=f32";
  return spec;
}

}  // namespace

Result<std::vector<ClassRule>> parse_class_policy(const std::string& given) {
  std::vector<ClassRule> rules;
  for (const std::string& part : split_rules(given)) {
    const std::string rule = expand_presets(part);
    if (rule != part) {
      STRATA_ASSIGN(auto preset, parse_class_policy(rule));
      rules.insert(rules.end(), preset.begin(), preset.end());
      continue;
    }
    const size_t eq = rule.find('=');
    if (rule.empty()) return err("--policy '%s': empty rule", given.c_str());
    if (eq == std::string::npos)
      return err(
          "--policy rule '%s': expected CLASS=TYPE, layers[...].CLASS=TYPE or a preset (fp4-experts, "
          "fp4-all)",
          rule.c_str());
    ClassRule r;
    std::string lhs = rule.substr(0, eq);
    if (lhs.rfind("layers[", 0) == 0) {
      const size_t close = lhs.find("].");
      if (close == std::string::npos)
        return err("--policy rule '%s': expected layers[L,...].CLASS=TYPE", rule.c_str());
      STRATA_ASSIGN(r.layers, parse_layers(lhs.substr(7, close - 7), rule));
      lhs = lhs.substr(close + 2);
    }
    bool known = false;
    for (const char* c : kClasses) known = known || lhs == c;
    if (!known)
      return err(
          "--policy rule '%s': unknown tensor class '%s' (router, attn, experts, shexp, ffn, embd, output)",
          rule.c_str(), lhs.c_str());
    r.cls = lhs;
    const std::string tname = rule.substr(eq + 1);
    if (!type_from_name(tname, &r.type) || !type_info(r.type).known)
      return err("--policy rule '%s': unknown type '%s'", rule.c_str(), tname.c_str());
    rules.push_back(std::move(r));
  }
  return rules;
}

Status check_class_policy(const std::vector<ClassRule>& rules, int n_layer) {
  for (const ClassRule& r : rules) {
    for (int l : r.layers) {
      if (l < -n_layer || l >= n_layer)
        return err("--policy: layer %d of class '%s' is outside the model's %d layers", l, r.cls.c_str(),
                   n_layer);
    }
  }
  return {};
}

std::string tensor_class(const std::string& name) {
  if (name == "token_embd.weight") return "embd";
  if (name == "output.weight") return "output";
  if (name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0 || has(name, "_norm")) return "";
  if (has(name, "ffn_gate_inp")) return "router";
  if (has(name, "_exps")) return "experts";
  if (has(name, "_shexp")) return "shexp";
  if (has(name, "attn_")) return "attn";
  if (has(name, "ffn_")) return "ffn";
  return "";
}

bool class_policy_type(const std::vector<ClassRule>& rules, const std::string& name, int n_layer,
                       GgmlType* out) {
  const std::string cls = tensor_class(name);
  if (cls.empty()) return false;
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) layer = -1;
  bool found = false;
  for (const ClassRule& r : rules) {
    if (r.cls != cls) continue;
    bool in = r.layers.empty();
    for (int l : r.layers) in = in || (layer >= 0 && (l >= 0 ? l : n_layer + l) == layer);
    if (in) {
      *out = r.type;
      found = true;
    }
  }
  return found;
}

}  // namespace strata
