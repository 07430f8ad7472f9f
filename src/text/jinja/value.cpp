// Jinja values: truth, printing, equality, ordering, JSON in and out.
#include "text/jinja/value.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "text/utf8.h"

namespace strata::jinja {

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < pos.size()) return &pos[index];
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

namespace {

// The release loop of List / Dict: the outermost destructor collects what its items hold and
// drops it one by one; destructors that run meanwhile only add to the collection.
thread_local std::vector<std::shared_ptr<const void>>* t_pending = nullptr;

void release(Value& v, std::vector<std::shared_ptr<const void>>* pending) {
  if (v.list) pending->push_back(std::move(v.list));
  if (v.dict) pending->push_back(std::move(v.dict));
  if (v.fn) pending->push_back(std::move(v.fn));  // a bound method holds its object
}

template <class Items, class Get>
void release_items(Items& items, Get get) {
  std::vector<std::shared_ptr<const void>> local;
  const bool outermost = t_pending == nullptr;
  if (outermost) t_pending = &local;
  for (auto& item : items) release(get(item), t_pending);
  if (!outermost) return;
  while (!local.empty()) {
    std::shared_ptr<const void> p = std::move(local.back());
    local.pop_back();
    p.reset();  // may add to `local`
  }
  t_pending = nullptr;
}

std::atomic<int64_t> g_live{0};

// The containers made while a ContainerArena lives on this thread (weak: tracking keeps nothing).
struct Tracked {
  std::vector<std::weak_ptr<List>> lists;
  std::vector<std::weak_ptr<Dict>> dicts;
  size_t compact_at = 1024;
  void compact() {  // drop the entries of freed containers (loops make many short-lived ones)
    std::erase_if(lists, [](const auto& w) { return w.expired(); });
    std::erase_if(dicts, [](const auto& w) { return w.expired(); });
    compact_at = std::max<size_t>(1024, 2 * (lists.size() + dicts.size()));
  }
  void added() {
    if (lists.size() + dicts.size() >= compact_at) compact();
  }
};
thread_local Tracked* t_tracked = nullptr;

}  // namespace

List::~List() {
  release_items(*this, [](Value& v) -> Value& { return v; });
}

Dict::~Dict() {
  release_items(items, [](std::pair<std::string, Value>& kv) -> Value& { return kv.second; });
}

Value Value::new_list(List items) {
  Value x = with(Kind::list);
  x.list = std::shared_ptr<List>(new List(std::move(items)), [](List* l) {
    --g_live;
    delete l;
  });
  ++g_live;
  if (t_tracked) {
    t_tracked->lists.push_back(x.list);
    t_tracked->added();
  }
  return x;
}

Value Value::new_dict() {
  Value x = with(Kind::dict);
  x.dict = std::shared_ptr<Dict>(new Dict(), [](Dict* d) {
    --g_live;
    delete d;
  });
  ++g_live;
  if (t_tracked) {
    t_tracked->dicts.push_back(x.dict);
    t_tracked->added();
  }
  return x;
}

ContainerArena::ContainerArena() {
  if (t_tracked) return;  // an arena inside another: the outer one tracks
  t_tracked = new Tracked();
  owner_ = true;
}

ContainerArena::~ContainerArena() {
  if (!owner_) return;
  Tracked* t = t_tracked;
  t_tracked = nullptr;
  // Empty what is still alive: only cycles hold it now. Their items are released by the lists'
  // and dicts' own loops once the last holder goes.
  for (auto& w : t->lists) {
    if (auto l = w.lock()) List().swap(*l);
  }
  for (auto& w : t->dicts) {
    if (auto d = w.lock()) std::vector<std::pair<std::string, Value>>().swap(d->items);
  }
  delete t;
}

int64_t ContainerArena::live() {
  return g_live.load();
}

Value Value::function(std::string name, NativeFn fn) {
  Value x = with(Kind::function);
  x.fn = std::make_shared<const NativeFn>(std::move(fn));
  x.fn_name = std::move(name);
  return x;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

Value* Dict::find(std::string_view key) {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  if (Value* old = find(key)) {
    *old = std::move(v);
    return;
  }
  items.emplace_back(key, std::move(v));
}

Value Dict::key(const std::string& k) const {
  if (int_keys && !k.empty()) {
    char* end = nullptr;
    const long long v = std::strtoll(k.c_str(), &end, 10);
    if (*end == '\0') return Value::integer(v);
  }
  return Value::str(k);
}

bool Dict::erase(std::string_view key) {
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (it->first == key) {
      items.erase(it);
      return true;
    }
  }
  return false;
}

std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string ascii_upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  auto drop = [&](char c) {
    return chars && chars->is_string() ? chars->s.find(c) != std::string::npos : is_space(c);
  };
  size_t b = 0, e = s.size();
  while (left && b < e && drop(s[b])) ++b;
  while (right && e > b && drop(s[e - 1])) --e;
  return s.substr(b, e - b);
}

const char* kind_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined:
      return "undefined";
    case Value::Kind::none:
      return "none";
    case Value::Kind::boolean:
      return "boolean";
    case Value::Kind::integer:
      return "integer";
    case Value::Kind::floating:
      return "float";
    case Value::Kind::string:
      return "string";
    case Value::Kind::list:
      return v.tuple ? "tuple" : "list";
    case Value::Kind::dict:
      return v.dict->is_namespace ? "namespace" : "dict";
    case Value::Kind::function:
      return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      return false;
    case Value::Kind::boolean:
      return v.b;
    case Value::Kind::integer:
      return v.i != 0;
    case Value::Kind::floating:
      return v.f != 0;
    case Value::Kind::string:
      return !v.s.empty();
    case Value::Kind::list:
      return !v.list->empty();
    case Value::Kind::dict:
      return v.dict->is_namespace || !v.dict->items.empty();
    case Value::Kind::function:
      return true;
  }
  return false;
}

std::string float_str(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  if (d == std::floor(d) && std::fabs(d) < 1e21) {
    std::snprintf(buf, sizeof(buf), "%.1f", d);
    return buf;
  }
  // Shortest round trip, as JavaScript writes it: fixed from 1e-6 to 1e21, else "1e-7", "1.5e+21".
  const double mag = std::fabs(d);
  if (mag >= 1e-6 && mag < 1e21) {
    auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::fixed);
    return std::string(buf, r.ptr);
  }
  auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  const size_t e = s.find('e');
  std::string exp = s.substr(e + 1);
  const bool neg = exp[0] == '-';
  exp.erase(0, 1);
  while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
  return s.substr(0, e) + "e" + (neg ? "-" : "+") + exp;
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      return "";
    case Value::Kind::boolean:
      return v.b ? "true" : "false";
    case Value::Kind::integer:
      return std::to_string(v.i);
    case Value::Kind::floating:
      return float_str(v.f);
    case Value::Kind::string:
      return v.s;
    case Value::Kind::list:
    case Value::Kind::dict: {
      auto j = to_json(v);
      return j.ok() ? *j : "";
    }
    case Value::Kind::function:
      return "<function " + v.fn_name + ">";
  }
  return "";
}

bool equal(const Value& a, const Value& b, int depth) {
  if (depth > 256) return false;
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      return true;
    case Value::Kind::boolean:
      return a.b == b.b;
    case Value::Kind::string:
      return a.s == b.s;
    case Value::Kind::list:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equal((*a.list)[k], (*b.list)[k], depth + 1)) return false;
      return true;
    case Value::Kind::dict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, x] : a.dict->items) {
        const Value* y = b.dict->find(k);
        if (!y || !equal(x, *y, depth + 1)) return false;
      }
      return true;
    case Value::Kind::function:
      return a.fn == b.fn;
    default:
      return false;
  }
}

Result<int> compare(const Value& a, const Value& b, int depth) {
  if (depth > 256) return err("cannot compare values nested deeper than 256");
  const bool an = a.is_number() || a.kind == Value::Kind::boolean;
  const bool bn = b.is_number() || b.kind == Value::Kind::boolean;
  if (an && bn) {
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) return a.s < b.s ? -1 : (a.s > b.s ? 1 : 0);
  if (a.is_list() && b.is_list()) {
    for (size_t k = 0; k < a.list->size() && k < b.list->size(); ++k) {
      STRATA_ASSIGN(int c, compare((*a.list)[k], (*b.list)[k], depth + 1));
      if (c != 0) return c;
    }
    return a.list->size() < b.list->size() ? -1 : (a.list->size() > b.list->size() ? 1 : 0);
  }
  return err("cannot compare %s with %s", kind_name(a), kind_name(b));
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  for (size_t k = 0; k < s.size(); ++k) {
    const auto c = static_cast<unsigned char>(s[k]);
    char buf[16];
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else if (c >= 0x80 && ensure_ascii) {
          // One UTF-8 sequence (text/utf8.h: a bad byte reads U+FFFD), written as UTF-16 \uXXXX units.
          size_t pos = k;
          uint32_t cp = text::utf8_decode_one(s, &pos);
          k = pos - 1;
          if (cp >= 0x10000) {
            cp -= 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
          }
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

namespace {

Status write_json(const Value& v, const JsonStyle& st, int depth, std::string* out) {
  if (depth > 256) return err("tojson: nesting deeper than 256");
  switch (v.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      *out += "null";
      return {};
    case Value::Kind::boolean:
      *out += v.b ? "true" : "false";
      return {};
    case Value::Kind::integer:
      *out += std::to_string(v.i);
      return {};
    case Value::Kind::floating: {
      if (!std::isfinite(v.f)) {
        *out += "null";
        return {};
      }
      std::string s = float_str(v.f);
      if (s.size() > 2 && s.ends_with(".0")) s.resize(s.size() - 2);  // JSON.stringify(1.0) is "1"
      *out += s;
      return {};
    }
    case Value::Kind::string:
      *out += json_quote(v.s, st.ensure_ascii);
      return {};
    case Value::Kind::function:
      return err("tojson: cannot write a function as JSON");
    case Value::Kind::list:
    case Value::Kind::dict:
      break;
  }
  const bool indented = st.indent >= 0;
  const std::string item_sep = st.item_sep ? *st.item_sep : (indented ? "," : ", ");
  const std::string pad =
      indented ? "\n" + std::string(static_cast<size_t>(st.indent) * (depth + 1), ' ') : "";
  const std::string close_pad =
      indented ? "\n" + std::string(static_cast<size_t>(st.indent) * depth, ' ') : "";
  if (v.is_list()) {
    *out += '[';
    for (size_t k = 0; k < v.list->size(); ++k) {
      if (k) *out += item_sep;
      *out += pad;
      STRATA_TRY(write_json((*v.list)[k], st, depth + 1, out));
    }
    if (!v.list->empty()) *out += close_pad;
    *out += ']';
    return {};
  }
  std::vector<const std::pair<std::string, Value>*> items;
  for (const auto& kv : v.dict->items) items.push_back(&kv);
  if (st.sort_keys)
    std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
  *out += '{';
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) *out += item_sep;
    *out += pad;
    *out += json_quote(items[k]->first, st.ensure_ascii);
    *out += st.key_sep;
    STRATA_TRY(write_json(items[k]->second, st, depth + 1, out));
  }
  if (!items.empty()) *out += close_pad;
  *out += '}';
  return {};
}

}  // namespace

Result<std::string> to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  STRATA_TRY(write_json(v, style, 0, &out));
  return out;
}

Result<Value> from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > 512) return err("template input nested deeper than 512");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::integer(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();
      if (d == std::floor(d) && std::fabs(d) < 9e15) return Value::integer(static_cast<int64_t>(d));
      return Value::floating(d);
    }
    case nlohmann::ordered_json::value_t::string:
      return Value::str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) {
        STRATA_ASSIGN(Value v, from_json(e, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::new_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::new_dict();
      for (auto it = j.begin(); it != j.end(); ++it) {
        STRATA_ASSIGN(Value v, from_json(it.value(), depth + 1));
        d.dict->items.emplace_back(it.key(), std::move(v));
      }
      return d;
    }
    default:
      return Value();
  }
}

}  // namespace strata::jinja
