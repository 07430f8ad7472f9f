// Jinja's global functions (range, namespace, dict, raise_exception, strftime_now) and the
// helpers the builtins share (iteration, attribute lookup, UTF-8 characters).
#include <ctime>
#include <unordered_map>

#include "text/jinja/interp.h"

namespace strata::jinja {

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    size_t n = 1;
    const auto c = static_cast<unsigned char>(s[k]);
    if (c >= 0xf0)
      n = 4;
    else if (c >= 0xe0)
      n = 3;
    else if (c >= 0xc0)
      n = 2;
    n = std::min(n, s.size() - k);
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

Value get_attr(const Value& obj, std::string_view name) {
  if (obj.is_dict()) {
    if (const Value* v = obj.dict->find(name)) return *v;
  }
  return Value();
}

Result<List> iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::list:
      return *v.list;
    case Value::Kind::dict: {
      List keys;
      for (const auto& [k, x] : v.dict->items) keys.push_back(v.dict->key(k));
      return keys;
    }
    case Value::Kind::string: {
      List chars;
      for (auto& c : utf8_chars(v.s)) chars.push_back(Value::str(std::move(c)));
      return chars;
    }
    case Value::Kind::undefined:
    case Value::Kind::none:
      return List{};
    default:
      return err("a %s is not iterable", kind_name(v));
  }
}

namespace {

Result<Value> range_fn(CallArgs& a) {
  int64_t p[3] = {0, 0, 1};
  if (a.pos.empty() || a.pos.size() > 3) return err("range: takes 1 to 3 integers");
  for (size_t k = 0; k < a.pos.size(); ++k) {
    if (a.pos[k].kind != Value::Kind::integer) return err("range: arguments must be integers");
  }
  if (a.pos.size() == 1) {
    p[1] = a.pos[0].i;
  } else {
    p[0] = a.pos[0].i;
    p[1] = a.pos[1].i;
    if (a.pos.size() == 3) p[2] = a.pos[2].i;
  }
  if (p[2] == 0) return err("range: step cannot be zero");
  List out;
  for (int64_t k = p[0]; p[2] > 0 ? k < p[1] : k > p[1]; k += p[2]) {
    if (out.size() >= 1'000'000) return err("range: more than 1000000 items");
    out.push_back(Value::integer(k));
  }
  return Value::new_list(std::move(out));
}

Result<Value> namespace_fn(CallArgs& a, bool ns) {
  Value d = Value::new_dict();
  d.dict->is_namespace = ns;
  for (const Value& p : a.pos) {
    if (!p.is_dict()) return err("%s: positional arguments must be dicts", ns ? "namespace" : "dict");
    for (const auto& [k, v] : p.dict->items) d.dict->set(k, v);
  }
  for (const auto& [k, v] : a.kw) d.dict->set(k, v);
  return d;
}

Result<Value> strftime_fn(CallArgs& a) {
  if (a.pos.empty() || !a.pos[0].is_string()) return err("strftime_now: needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof(buf), a.pos[0].s.c_str(), &tm);
  return Value::str(std::string(buf, n));
}

}  // namespace

const Value* global_function(const std::string& name) {
  static const std::unordered_map<std::string, Value> kGlobals = [] {
    std::unordered_map<std::string, Value> g;
    g["range"] = Value::function("range", range_fn);
    g["namespace"] = Value::function("namespace", [](CallArgs& a) { return namespace_fn(a, true); });
    g["dict"] = Value::function("dict", [](CallArgs& a) { return namespace_fn(a, false); });
    g["raise_exception"] = Value::function("raise_exception", [](CallArgs& a) -> Result<Value> {
      return err("raise_exception: %s", a.pos.empty() ? "" : to_str(a.pos[0]).c_str());
    });
    g["strftime_now"] = Value::function("strftime_now", strftime_fn);
    return g;
  }();
  auto it = kGlobals.find(name);
  return it == kGlobals.end() ? nullptr : &it->second;
}

}  // namespace strata::jinja
