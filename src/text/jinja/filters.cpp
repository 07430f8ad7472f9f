// Jinja's filters, as chat templates use them (tojson, selectattr / map, dictsort, trim, ...).
#include <algorithm>
#include <cctype>
#include <cmath>

#include "text/jinja/interp.h"

namespace strata::jinja {
namespace {

Result<bool> flag(const CallArgs& a, size_t index, const char* name, bool dflt) {
  const Value* v = a.get(index, name);
  if (!v || v->is_undefined() || v->is_none()) return dflt;
  return truthy(*v);
}

// An attribute path "a.b" or "0" of an item (map / sort / selectattr / sum / unique).
Value attr_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      const size_t k = std::stoul(part);
      cur = k < cur.list->size() ? (*cur.list)[k] : Value();
    } else {
      cur = get_attr(cur, part);
    }
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Sort order: case-insensitive for strings unless case_sensitive.
Result<int> sort_compare(const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string())
    return compare(Value::str(ascii_lower(a.s)), Value::str(ascii_lower(b.s)));
  return compare(a, b);
}

Result<List> sorted(List items, bool reverse, bool case_sensitive, const Value* attribute) {
  Status bad;
  auto key = [&](const Value& v) { return attribute ? attr_path(v, to_str(*attribute)) : v; };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    auto c = sort_compare(key(a), key(b), case_sensitive);
    if (!c.ok()) {
      if (bad.ok()) bad = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  if (!bad.ok()) return bad.error();
  return items;
}

Result<Value> tojson(const Value& v, const CallArgs& a) {
  JsonStyle st;
  if (const Value* i = a.get(0, "indent"); i && !i->is_none() && !i->is_undefined()) {
    if (i->kind != Value::Kind::integer) return err("tojson: indent must be an integer");
    st.indent = static_cast<int>(std::clamp<int64_t>(i->i, 0, 64));
  }
  STRATA_ASSIGN(st.ensure_ascii, flag(a, 99, "ensure_ascii", false));
  STRATA_ASSIGN(st.sort_keys, flag(a, 99, "sort_keys", false));
  if (const Value* sep = a.get(99, "separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->list->size() != 2 || !(*sep->list)[0].is_string() ||
        !(*sep->list)[1].is_string())
      return err("tojson: separators must be two strings");
    st.item_sep = (*sep->list)[0].s;
    st.key_sep = (*sep->list)[1].s;
  }
  STRATA_ASSIGN(std::string s, to_json(v, st));
  return Value::str(std::move(s));
}

Result<Value> select_items(Interp& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  STRATA_ASSIGN(List items, iterate(v));
  size_t first = 0;
  std::string attribute;
  if (by_attr) {
    if (a.pos.empty() || !a.pos[0].is_string()) return err("an attribute name (a string) is needed");
    attribute = a.pos[0].s;
    first = 1;
  }
  std::string test;
  CallArgs targs;
  if (a.pos.size() > first) {
    if (!a.pos[first].is_string()) return err("the test name must be a string");
    test = a.pos[first].s;
    targs.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(first) + 1, a.pos.end());
  }
  List out;
  for (const Value& item : items) {
    STRATA_TRY(in.step());
    const Value x = by_attr ? attr_path(item, attribute) : item;
    bool ok;
    if (test.empty()) {
      ok = truthy(x);
    } else {
      STRATA_ASSIGN(ok, apply_test(test, x, targs));
    }
    if (ok == keep) out.push_back(item);
  }
  return Value::new_list(std::move(out));
}

Result<Value> map_items(Interp& in, const Value& v, CallArgs& a) {
  STRATA_ASSIGN(List items, iterate(v));
  List out;
  if (const Value* attr = a.get(99, "attribute")) {
    const Value* dflt = a.get(99, "default");
    for (const Value& item : items) {
      Value x = attr_path(item, to_str(*attr));
      out.push_back(x.is_undefined() && dflt ? *dflt : x);
    }
    return Value::new_list(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string()) return err("map: needs a filter name or attribute=");
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& item : items) {
    CallArgs copy = rest;
    STRATA_ASSIGN(Value x, apply_filter(in, a.pos[0].s, item, copy));
    out.push_back(std::move(x));
  }
  return Value::new_list(std::move(out));
}

std::string title_case(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || u >= 0x80) {
      c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
      start = false;
    } else {
      start = true;
    }
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string indent(const std::string& s, const CallArgs& a) {
  std::string pad = "    ";
  if (const Value* w = a.get(0, "width")) {
    pad = w->is_string() ? w->s : std::string(static_cast<size_t>(std::clamp<int64_t>(w->i, 0, 256)), ' ');
  }
  const bool first = a.get(1, "first") && truthy(*a.get(1, "first"));
  const bool blank = a.get(2, "blank") && truthy(*a.get(2, "blank"));
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    const size_t nl = s.find('\n', start);
    const std::string part = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((line > 0 || first) && (blank || !part.empty())) out += pad;
    out += part;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return out;
}

Result<Value> replace(const std::string& s, const CallArgs& a) {
  const Value* from = a.get(0, "old");
  const Value* to = a.get(1, "new");
  if (!from || !to) return err("replace: needs the old and new strings");
  const std::string f = to_str(*from), t = to_str(*to);
  int64_t count = -1;
  if (const Value* c = a.get(2, "count"); c && c->kind == Value::Kind::integer) count = c->i;
  std::string out;
  if (f.empty()) {  // Python inserts the replacement between characters
    const auto chars = utf8_chars(s);
    int64_t done = 0;
    for (const auto& ch : chars) {
      if (count < 0 || done < count) {
        out += t;
        ++done;
      }
      out += ch;
    }
    if (count < 0 || done < count) out += t;
    return Value::str(std::move(out));
  }
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t at = s.find(f, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += t;
    start = at + f.size();
  }
  out.append(s, start);
  return Value::str(std::move(out));
}

Result<Value> minmax(const Value& v, const CallArgs& a, bool want_max) {
  STRATA_ASSIGN(List items, iterate(v));
  if (items.empty()) return Value();
  STRATA_ASSIGN(bool cs, flag(a, 0, "case_sensitive", false));
  const Value* attribute = a.get(1, "attribute");
  Value best = items[0];
  for (const Value& x : items) {
    const Value kx = attribute ? attr_path(x, to_str(*attribute)) : x;
    const Value kb = attribute ? attr_path(best, to_str(*attribute)) : best;
    STRATA_ASSIGN(int c, sort_compare(kx, kb, cs));
    if (want_max ? c > 0 : c < 0) best = x;
  }
  return best;
}

Result<Value> to_int(const Value& v, const CallArgs& a) {
  const Value* d = a.get(0, "default");
  const Value dflt = d ? *d : Value::integer(0);
  switch (v.kind) {
    case Value::Kind::integer:
      return v;
    case Value::Kind::floating:
      return Value::integer(static_cast<int64_t>(std::trunc(v.f)));
    case Value::Kind::boolean:
      return Value::integer(v.b);
    case Value::Kind::string: {
      const std::string t = strip_chars(v.s, nullptr, true, true);
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(t.c_str(), &end, 10);
      if (t.empty() || errno == ERANGE || *end != '\0') return dflt;
      return Value::integer(x);
    }
    default:
      return dflt;
  }
}

Result<Value> to_float(const Value& v, const CallArgs& a) {
  const Value* d = a.get(0, "default");
  const Value dflt = d ? *d : Value::floating(0);
  if (v.is_number() || v.kind == Value::Kind::boolean) return Value::floating(v.as_double());
  if (v.is_string()) {
    const std::string t = strip_chars(v.s, nullptr, true, true);
    char* end = nullptr;
    const double x = std::strtod(t.c_str(), &end);
    if (t.empty() || *end != '\0') return dflt;
    return Value::floating(x);
  }
  return dflt;
}

Value items_of(const Value& v) {
  List out;
  if (v.is_dict()) {
    for (const auto& [k, x] : v.dict->items) {
      Value pair = Value::new_list({v.dict->key(k), x});
      pair.tuple = true;
      out.push_back(std::move(pair));
    }
  }
  return Value::new_list(std::move(out));
}

Result<Value> dictsort(const Value& v, const CallArgs& a) {
  if (!v.is_dict()) return err("dictsort: needs a dict, got %s", kind_name(v));
  STRATA_ASSIGN(bool cs, flag(a, 0, "case_sensitive", false));
  const Value* by = a.get(1, "by");
  const bool by_value = by && by->is_string() && by->s == "value";
  STRATA_ASSIGN(bool reverse, flag(a, 2, "reverse", false));
  Value pairs = items_of(v);
  Value index = Value::str(by_value ? "1" : "0");
  STRATA_ASSIGN(List s, sorted(*pairs.list, reverse, cs, &index));
  return Value::new_list(std::move(s));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

Result<Value> apply_filter(Interp& in, const std::string& name, const Value& v, CallArgs& a) {
  const std::string& n = name;
  if (n == "safe" || n == "escape" || n == "e" || n == "forceescape")
    return n == "safe" ? v : Value::str(html_escape(to_str(v)));
  if (n == "tojson") return tojson(v, a);
  if (n == "string") return Value::str(to_str(v));
  if (n == "default" || n == "d") {
    const Value* d = a.get(0, "default_value");
    STRATA_ASSIGN(bool boolean, flag(a, 1, "boolean", false));
    if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value::str("");
    return v;
  }
  if (n == "length" || n == "count") {
    if (v.is_string()) return Value::integer(static_cast<int64_t>(utf8_chars(v.s).size()));
    if (v.is_list()) return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.is_dict()) return Value::integer(static_cast<int64_t>(v.dict->items.size()));
    if (v.is_undefined()) return Value::integer(0);
    return err("%s: a %s has no length", n.c_str(), kind_name(v));
  }
  if (n == "items") {
    if (v.is_undefined() || v.is_none()) return Value::new_list();
    if (!v.is_dict()) return err("items: needs a dict, got %s", kind_name(v));
    return items_of(v);
  }
  if (n == "dictsort") return dictsort(v, a);
  if (n == "list") {
    STRATA_ASSIGN(List items, iterate(v));
    return Value::new_list(std::move(items));
  }
  if (n == "first" || n == "last") {
    STRATA_ASSIGN(List items, iterate(v));
    if (items.empty()) return Value();
    return n == "first" ? items.front() : items.back();
  }
  if (n == "reverse") {
    if (v.is_string()) {
      auto chars = utf8_chars(v.s);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value::str(std::move(out));
    }
    STRATA_ASSIGN(List items, iterate(v));
    std::reverse(items.begin(), items.end());
    return Value::new_list(std::move(items));
  }
  if (n == "sort") {
    STRATA_ASSIGN(List items, iterate(v));
    STRATA_ASSIGN(bool reverse, flag(a, 0, "reverse", false));
    STRATA_ASSIGN(bool cs, flag(a, 1, "case_sensitive", false));
    STRATA_ASSIGN(List s, sorted(std::move(items), reverse, cs, a.get(2, "attribute")));
    return Value::new_list(std::move(s));
  }
  if (n == "unique") {
    STRATA_ASSIGN(List items, iterate(v));
    STRATA_ASSIGN(bool cs, flag(a, 0, "case_sensitive", false));
    const Value* attribute = a.get(1, "attribute");
    List out, keys;
    for (const Value& x : items) {
      Value k = attribute ? attr_path(x, to_str(*attribute)) : x;
      if (!cs && k.is_string()) k = Value::str(ascii_lower(k.s));
      bool seen = false;
      for (const Value& y : keys) seen = seen || equal(k, y);
      if (!seen) {
        keys.push_back(k);
        out.push_back(x);
      }
    }
    return Value::new_list(std::move(out));
  }
  if (n == "join") {
    STRATA_ASSIGN(List items, iterate(v));
    const Value* sep = a.get(0, "d");
    const Value* attribute = a.get(1, "attribute");
    std::string out;
    for (size_t k = 0; k < items.size(); ++k) {
      if (k && sep) out += to_str(*sep);
      out += to_str(attribute ? attr_path(items[k], to_str(*attribute)) : items[k]);
      if (out.size() > in.limits().max_output) return err("join: the result is too large");
    }
    return Value::str(std::move(out));
  }
  if (n == "map") return map_items(in, v, a);
  if (n == "select" || n == "reject") return select_items(in, v, a, false, n == "select");
  if (n == "selectattr" || n == "rejectattr") return select_items(in, v, a, true, n == "selectattr");
  if (n == "sum") {
    STRATA_ASSIGN(List items, iterate(v));
    const Value* attribute = a.get(0, "attribute");
    const Value* start = a.get(1, "start");
    Value total = start ? *start : Value::integer(0);
    for (const Value& x : items) {
      const Value y = attribute ? attr_path(x, to_str(*attribute)) : x;
      if (!y.is_number() || !total.is_number()) return err("sum: a %s is not a number", kind_name(y));
      total = total.kind == Value::Kind::integer && y.kind == Value::Kind::integer
                  ? Value::integer(total.i + y.i)
                  : Value::floating(total.as_double() + y.as_double());
    }
    return total;
  }
  if (n == "max" || n == "min") return minmax(v, a, n == "max");
  if (n == "int") return to_int(v, a);
  if (n == "float") return to_float(v, a);
  if (n == "abs") {
    if (v.kind == Value::Kind::integer) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.kind == Value::Kind::floating) return Value::floating(std::fabs(v.f));
    return err("abs: a %s is not a number", kind_name(v));
  }
  if (n == "round") {
    const Value* p = a.get(0, "precision");
    const Value* m = a.get(1, "method");
    const double scale =
        std::pow(10.0, p && p->kind == Value::Kind::integer ? static_cast<double>(p->i) : 0.0);
    const std::string method = m && m->is_string() ? m->s : "common";
    double x = v.as_double() * scale;
    x = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
    return Value::floating(x / scale);
  }
  if (n == "bool") return Value::boolean(truthy(v));
  if (n == "attr") {
    const Value* an = a.get(0, "name");
    return an ? get_attr(v, to_str(*an)) : Value();
  }
  if (n == "batch" || n == "slice" || n == "groupby" || n == "xmlattr" || n == "urlencode" ||
      n == "filesizeformat")
    return err("filter '%s' is not supported", n.c_str());
  // String filters.
  if (n == "upper" || n == "lower" || n == "title" || n == "capitalize" || n == "trim" || n == "indent" ||
      n == "replace" || n == "wordcount" || n == "center" || n == "truncate") {
    // Undefined is "" (as Python's Jinja prints it); none has no string to work on.
    if (v.is_none()) return err("%s: needs a string, got none", n.c_str());
    const std::string s = to_str(v);
    if (n == "upper") return Value::str(ascii_upper(s));
    if (n == "lower") return Value::str(ascii_lower(s));
    if (n == "title") return Value::str(title_case(s));
    if (n == "capitalize") return Value::str(capitalize(s));
    if (n == "trim") return Value::str(strip_chars(s, a.get(0, "chars"), true, true));
    if (n == "indent") return Value::str(indent(s, a));
    if (n == "replace") return replace(s, a);
    if (n == "wordcount") {
      int64_t words = 0;
      bool in_word = false;
      for (char c : s) {
        if (!is_space(c) && !in_word) ++words;
        in_word = !is_space(c);
      }
      return Value::integer(words);
    }
    return err("filter '%s' is not supported", n.c_str());
  }
  return err("unknown filter '%s'", n.c_str());
}

}  // namespace strata::jinja
