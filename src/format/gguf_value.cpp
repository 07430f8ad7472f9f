// GgufValue: typed metadata values. Storage convention (shared by reader and writer):
//   u8/u16/u32/u64 -> uint64_t, i8/i16/i32/i64 -> int64_t, f32/f64 -> double, bool -> bool,
//   string -> std::string, array -> shared_ptr<GgufArray>.
#include <charconv>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <limits>
#include <string>

#include "format/gguf.h"

namespace strata {

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
      return "u8";
    case GgufValueType::i8:
      return "i8";
    case GgufValueType::u16:
      return "u16";
    case GgufValueType::i16:
      return "i16";
    case GgufValueType::u32:
      return "u32";
    case GgufValueType::i32:
      return "i32";
    case GgufValueType::f32:
      return "f32";
    case GgufValueType::boolean:
      return "bool";
    case GgufValueType::string:
      return "string";
    case GgufValueType::array:
      return "array";
    case GgufValueType::u64:
      return "u64";
    case GgufValueType::i64:
      return "i64";
    case GgufValueType::f64:
      return "f64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::u16:
    case GgufValueType::i16:
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::u64:
    case GgufValueType::i64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const {
  return type == GgufValueType::f32 || type == GgufValueType::f64;
}

bool GgufValue::as_int(int64_t* out) const {
  if (!is_integer()) return false;
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(*u);
    return true;
  }
  if (const auto* i = std::get_if<int64_t>(&v)) {
    *out = *i;
    return true;
  }
  return false;
}

bool GgufValue::as_float(double* out) const {
  if (is_float()) {
    if (const auto* d = std::get_if<double>(&v)) {
      *out = *d;
      return true;
    }
    return false;
  }
  if (const auto* u = std::get_if<uint64_t>(&v); u && is_integer()) {
    *out = static_cast<double>(*u);
    return true;
  }
  if (const auto* i = std::get_if<int64_t>(&v); i && is_integer()) {
    *out = static_cast<double>(*i);
    return true;
  }
  return false;
}

const std::string* GgufValue::as_string() const {
  return type == GgufValueType::string ? std::get_if<std::string>(&v) : nullptr;
}

const GgufArray* GgufValue::as_array() const {
  if (type != GgufValueType::array) return nullptr;
  const auto* p = std::get_if<std::shared_ptr<GgufArray>>(&v);
  return p ? p->get() : nullptr;
}

GgufValue gguf_make_int(GgufValueType t, int64_t x) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufValueType::u8:
    case GgufValueType::u16:
    case GgufValueType::u32:
    case GgufValueType::u64:
      v.v = static_cast<uint64_t>(x);  // a negative x wraps; the writer rejects it as out of range
      break;
    default:
      v.v = x;
  }
  return v;
}

GgufValue gguf_make_u64(uint64_t x) {
  GgufValue v;
  v.type = GgufValueType::u64;
  v.v = x;
  return v;
}

GgufValue gguf_make_float(GgufValueType t, double x) {
  GgufValue v;
  v.type = t;
  v.v = x;
  return v;
}

GgufValue gguf_make_bool(bool b) {
  GgufValue v;
  v.type = GgufValueType::boolean;
  v.v = b;
  return v;
}

GgufValue gguf_make_string(std::string s) {
  GgufValue v;
  v.type = GgufValueType::string;
  v.v = std::move(s);
  return v;
}

GgufValue gguf_make_array(GgufValueType elem_type, std::vector<GgufValue> items) {
  auto a = std::make_shared<GgufArray>();
  a->elem_type = elem_type;
  a->items = std::move(items);
  GgufValue v;
  v.type = GgufValueType::array;
  v.v = std::move(a);
  return v;
}

bool gguf_value_equal(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  if (a.type == GgufValueType::array) {
    const GgufArray* x = a.as_array();
    const GgufArray* y = b.as_array();
    if (!x || !y) return x == y;
    if (x->elem_type != y->elem_type || x->items.size() != y->items.size()) return false;
    for (size_t i = 0; i < x->items.size(); ++i)
      if (!gguf_value_equal(x->items[i], y->items[i])) return false;
    return true;
  }
  if (a.type == GgufValueType::f32) {
    // Compare as stored on disk (bitwise f32), so NaNs and -0 round-trip as equal.
    const auto* x = std::get_if<double>(&a.v);
    const auto* y = std::get_if<double>(&b.v);
    if (!x || !y) return false;
    const float fx = static_cast<float>(*x), fy = static_cast<float>(*y);
    return std::memcmp(&fx, &fy, sizeof fx) == 0;
  }
  if (a.type == GgufValueType::f64) {
    const auto* x = std::get_if<double>(&a.v);
    const auto* y = std::get_if<double>(&b.v);
    return x && y && std::memcmp(x, y, sizeof *x) == 0;
  }
  return a.v == b.v;
}

namespace {

std::string quote(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  size_t n = 0;
  for (char c : s) {
    if (n++ >= max_chars) {
      out += "...\" (" + std::to_string(s.size()) + " bytes)";
      return out;
    }
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
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

template <class F>
std::string shortest(F x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

}  // namespace

std::string GgufValue::to_display(size_t max_items) const {
  switch (type) {
    case GgufValueType::boolean: {
      const auto* b = std::get_if<bool>(&v);
      return b ? (*b ? "true" : "false") : "?";
    }
    case GgufValueType::f32:
    case GgufValueType::f64: {
      const auto* d = std::get_if<double>(&v);
      if (!d) return "?";
      return type == GgufValueType::f32 ? shortest(static_cast<float>(*d)) : shortest(*d);
    }
    case GgufValueType::string: {
      const auto* s = std::get_if<std::string>(&v);
      return s ? quote(*s, 120) : "?";
    }
    case GgufValueType::array: {
      const GgufArray* a = as_array();
      if (!a) return "?";
      std::string out = "[";
      for (size_t i = 0; i < a->items.size() && i < max_items; ++i) {
        if (i) out += ", ";
        out += a->items[i].to_display(max_items);
      }
      if (a->items.size() > max_items) out += ", ...";
      out += "] (" + std::to_string(a->items.size()) + " x " + gguf_value_type_name(a->elem_type) + ")";
      return out;
    }
    default:
      break;
  }
  if (const auto* u = std::get_if<uint64_t>(&v)) return std::to_string(*u);
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  return "?";
}

}  // namespace strata
