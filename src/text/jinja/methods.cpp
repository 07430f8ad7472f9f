// Python methods templates call on strings (strip, split, startswith, format, ...), lists
// (append, pop, ...) and dicts (items, get, ...), bound to their object by `obj.name`.
#include <algorithm>
#include <cctype>

#include "text/jinja/interp.h"

namespace strata::jinja {
namespace {

Value str_list(std::vector<std::string> parts) {
  List out;
  for (auto& p : parts) out.push_back(Value::str(std::move(p)));
  return Value::new_list(std::move(out));
}

Result<Value> split(const std::string& s, const CallArgs& a, bool from_right) {
  const Value* sep = a.get(0, "sep");
  int64_t max = -1;
  if (const Value* m = a.get(1, "maxsplit"); m && m->kind == Value::Kind::integer) max = m->i;
  std::vector<std::string> parts;
  if (!sep || sep->is_none()) {  // runs of whitespace; no empty parts
    std::vector<std::pair<size_t, size_t>> words;
    for (size_t k = 0; k < s.size();) {
      while (k < s.size() && is_space(s[k])) ++k;
      if (k >= s.size()) break;
      size_t e = k;
      while (e < s.size() && !is_space(s[e])) ++e;
      words.emplace_back(k, e);
      k = e;
    }
    if (max < 0 || static_cast<int64_t>(words.size()) <= max + 1) {
      for (auto [b, e] : words) parts.push_back(s.substr(b, e - b));
    } else if (!from_right) {
      for (int64_t k = 0; k < max; ++k)
        parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
      parts.push_back(strip_chars(s.substr(words[max].first), nullptr, false, true));
    } else {
      const size_t keep = words.size() - static_cast<size_t>(max);
      parts.push_back(strip_chars(s.substr(0, words[keep - 1].second), nullptr, true, false));
      for (size_t k = keep; k < words.size(); ++k)
        parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
    }
    return str_list(std::move(parts));
  }
  if (!sep->is_string() || sep->s.empty()) return err("split: the separator must be a non-empty string");
  const std::string& d = sep->s;
  if (!from_right) {
    size_t start = 0;
    for (int64_t n = 0; max < 0 || n < max; ++n) {
      const size_t at = s.find(d, start);
      if (at == std::string::npos) break;
      parts.push_back(s.substr(start, at - start));
      start = at + d.size();
    }
    parts.push_back(s.substr(start));
  } else {
    size_t end = s.size();
    std::vector<std::string> rev;
    for (int64_t n = 0; max < 0 || n < max; ++n) {
      if (end < d.size()) break;
      const size_t at = s.rfind(d, end - d.size());
      if (at == std::string::npos) break;
      rev.push_back(s.substr(at + d.size(), end - at - d.size()));
      end = at;
    }
    rev.push_back(s.substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
  }
  return str_list(std::move(parts));
}

Result<bool> affix(const std::string& s, const CallArgs& a, bool prefix) {
  const Value* p = a.get(0, prefix ? "prefix" : "suffix");
  if (!p) return err("%s: needs a string", prefix ? "startswith" : "endswith");
  std::vector<std::string> options;
  if (p->is_string()) {
    options.push_back(p->s);
  } else if (p->is_list()) {
    for (const Value& x : *p->list) options.push_back(to_str(x));
  } else {
    return err("%s: needs a string or a tuple of strings", prefix ? "startswith" : "endswith");
  }
  for (const auto& o : options)
    if (prefix ? s.starts_with(o) : s.ends_with(o)) return true;
  return false;
}

// str.format with "{}", "{0}" and "{name}" fields (no format specs), "{{" and "}}" escapes.
Result<Value> format(const std::string& s, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '{' && k + 1 < s.size() && s[k + 1] == '{') {
      out += '{';
      ++k;
    } else if (c == '}' && k + 1 < s.size() && s[k + 1] == '}') {
      out += '}';
      ++k;
    } else if (c == '{') {
      const size_t close = s.find('}', k);
      if (close == std::string::npos) return err("format: a '{' without '}'");
      const std::string field = s.substr(k + 1, close - k - 1);
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < a.pos.size() ? &a.pos[auto_index++] : nullptr;
      } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
        const size_t i = std::stoul(field);
        v = i < a.pos.size() ? &a.pos[i] : nullptr;
      } else {
        v = a.get(SIZE_MAX, field);
      }
      if (!v) return err("format: no argument for {%s}", field.c_str());
      out += to_str(*v);
      k = close;
    } else {
      out += c;
    }
  }
  return Value::str(std::move(out));
}

Result<Value> string_method(const std::string& s, const std::string& n, CallArgs& a) {
  if (n == "strip") return Value::str(strip_chars(s, a.get(0, "chars"), true, true));
  if (n == "lstrip") return Value::str(strip_chars(s, a.get(0, "chars"), true, false));
  if (n == "rstrip") return Value::str(strip_chars(s, a.get(0, "chars"), false, true));
  if (n == "split") return split(s, a, false);
  if (n == "rsplit") return split(s, a, true);
  if (n == "splitlines") {
    std::vector<std::string> parts;
    size_t start = 0;
    while (start < s.size()) {
      size_t nl = s.find('\n', start);
      if (nl == std::string::npos) nl = s.size();
      std::string line = s.substr(start, nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      parts.push_back(std::move(line));
      start = nl + 1;
    }
    return str_list(std::move(parts));
  }
  if (n == "startswith" || n == "endswith") {
    STRATA_ASSIGN(bool r, affix(s, a, n == "startswith"));
    return Value::boolean(r);
  }
  if (n == "format") return format(s, a);
  if (n == "join") {
    const Value* items = a.get(0, "iterable");
    if (!items) return err("join: needs a list");
    STRATA_ASSIGN(List list, iterate(*items));
    std::string out;
    for (size_t k = 0; k < list.size(); ++k) {
      if (k) out += s;
      out += to_str(list[k]);
    }
    return Value::str(std::move(out));
  }
  if (n == "find" || n == "rfind" || n == "index" || n == "count") {
    const Value* sub = a.get(0, "sub");
    if (!sub || !sub->is_string()) return err("%s: needs a string", n.c_str());
    if (n == "count") {
      if (sub->s.empty()) return Value::integer(static_cast<int64_t>(utf8_chars(s).size()) + 1);
      int64_t c = 0;
      for (size_t at = s.find(sub->s); at != std::string::npos; at = s.find(sub->s, at + sub->s.size())) ++c;
      return Value::integer(c);
    }
    const size_t at = n == "rfind" ? s.rfind(sub->s) : s.find(sub->s);
    if (at == std::string::npos) {
      if (n == "index") return err("index: substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(utf8_chars(s.substr(0, at)).size()));
  }
  // The rest map onto the filters of the same name.
  return Value();
}

Result<Value> list_method(const Value& self, const std::string& n, CallArgs& a) {
  List& l = *self.list;
  if (n == "append") {
    if (a.pos.size() != 1) return err("append: takes one item");
    if (l.size() >= 10'000'000) return err("append: the list is too long");
    l.push_back(a.pos[0]);
    return Value::none();
  }
  if (n == "extend") {
    const Value* more = a.get(0, "iterable");
    if (!more) return err("extend: needs a list");
    STRATA_ASSIGN(List items, iterate(*more));
    l.insert(l.end(), items.begin(), items.end());
    return Value::none();
  }
  if (n == "insert") {
    if (a.pos.size() != 2 || a.pos[0].kind != Value::Kind::integer)
      return err("insert: takes an index and an item");
    const int64_t size = static_cast<int64_t>(l.size());
    int64_t at = a.pos[0].i < 0 ? a.pos[0].i + size : a.pos[0].i;
    at = std::clamp<int64_t>(at, 0, size);
    l.insert(l.begin() + at, a.pos[1]);
    return Value::none();
  }
  if (n == "pop") {
    if (l.empty()) return err("pop: the list is empty");
    const int64_t size = static_cast<int64_t>(l.size());
    int64_t at = size - 1;
    if (!a.pos.empty()) {
      if (a.pos[0].kind != Value::Kind::integer) return err("pop: the index must be an integer");
      at = a.pos[0].i < 0 ? a.pos[0].i + size : a.pos[0].i;
    }
    if (at < 0 || at >= size) return err("pop: index out of range");
    Value v = l[static_cast<size_t>(at)];
    l.erase(l.begin() + at);
    return v;
  }
  if (n == "index" || n == "count") {
    if (a.pos.empty()) return err("%s: needs an item", n.c_str());
    int64_t c = 0;
    for (size_t k = 0; k < l.size(); ++k) {
      if (!equal(l[k], a.pos[0])) continue;
      if (n == "index") return Value::integer(static_cast<int64_t>(k));
      ++c;
    }
    if (n == "index") return err("index: the item is not in the list");
    return Value::integer(c);
  }
  return Value();
}

Result<Value> dict_method(const Value& self, const std::string& n, CallArgs& a) {
  Dict& d = *self.dict;
  if (n == "items") {
    List out;
    for (const auto& [k, v] : d.items) {
      Value pair = Value::new_list({d.key(k), v});
      pair.tuple = true;
      out.push_back(std::move(pair));
    }
    return Value::new_list(std::move(out));
  }
  if (n == "keys" || n == "values") {
    List out;
    for (const auto& [k, v] : d.items) out.push_back(n == "keys" ? d.key(k) : v);
    return Value::new_list(std::move(out));
  }
  if (n == "get" || n == "pop") {
    const Value* key = a.get(0, "key");
    if (!key) return err("%s: needs a key", n.c_str());
    const Value* dflt = a.get(1, "default");
    const std::string k = key->is_string() ? key->s : to_str(*key);
    const Value* v = d.find(k);
    Value out = v ? *v : (dflt ? *dflt : Value::none());
    if (n == "pop") {
      if (!v && !dflt) return err("pop: no key '%s'", k.c_str());
      d.erase(k);
    }
    return out;
  }
  if (n == "update") {
    for (const Value& p : a.pos) {
      if (!p.is_dict()) return err("update: needs a dict");
      for (const auto& [k, v] : p.dict->items) d.set(k, v);
    }
    for (const auto& [k, v] : a.kw) d.set(k, v);
    return Value::none();
  }
  if (n == "setdefault") {
    const Value* key = a.get(0, "key");
    if (!key || !key->is_string()) return err("setdefault: needs a string key");
    if (const Value* v = d.find(key->s)) return *v;
    const Value* dflt = a.get(1, "default");
    d.set(key->s, dflt ? *dflt : Value::none());
    return dflt ? *dflt : Value::none();
  }
  if (n == "copy") {
    Value c = Value::new_dict();
    *c.dict = d;
    return c;
  }
  return Value();
}

bool has_method(const Value& obj, const std::string& n) {
  static const char* kString[] = {"strip",      "lstrip",     "rstrip",     "split",  "rsplit",
                                  "splitlines", "startswith", "endswith",   "format", "join",
                                  "find",       "rfind",      "index",      "count",  "upper",
                                  "lower",      "title",      "capitalize", "replace"};
  static const char* kList[] = {"append", "extend", "insert", "pop", "index", "count"};
  static const char* kDict[] = {"items", "keys", "values", "get", "pop", "update", "setdefault", "copy"};
  auto in = [&](auto& names) {
    return std::any_of(std::begin(names), std::end(names), [&](const char* x) { return n == x; });
  };
  if (obj.is_string()) return in(kString);
  if (obj.is_list()) return in(kList);
  if (obj.is_dict()) return in(kDict);
  return false;
}

}  // namespace

Value bound_method(const Value& obj, const std::string& name) {
  if (!has_method(obj, name)) return Value();
  return Value::function(name, [obj, name](CallArgs& a) -> Result<Value> {
    if (obj.is_string()) {
      if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
          name == "replace") {
        // The filters of the same names do the same (they use no interpreter state).
        static const Limits kLimits;
        Scope root;
        Interp in(kLimits, &root);
        return apply_filter(in, name, obj, a);
      }
      return string_method(obj.s, name, a);
    }
    if (obj.is_list()) return list_method(obj, name, a);
    return dict_method(obj, name, a);
  });
}

}  // namespace strata::jinja
