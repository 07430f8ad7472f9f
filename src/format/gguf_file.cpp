// GgufFile lookups and typed getters. Every error names the file, the key, and the expected vs
// actual type, so a model loader can pass it straight to the user.
#include <limits>

#include "format/gguf.h"

namespace strata {
namespace {

std::string actual_type(const GgufValue& v) {
  if (const GgufArray* a = v.as_array()) return std::string("array of ") + gguf_value_type_name(a->elem_type);
  return gguf_value_type_name(v.type);
}

}  // namespace

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const TensorView* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

#define STRATA_GGUF_MISSING(key) \
  err("gguf: %s: metadata key '%.*s' not found", path_.c_str(), static_cast<int>((key).size()), (key).data())
#define STRATA_GGUF_WRONG(key, v, expected)                                    \
  err("gguf: %s: metadata key '%.*s' has type %s, expected %s", path_.c_str(), \
      static_cast<int>((key).size()), (key).data(), actual_type(v).c_str(), expected)

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return STRATA_GGUF_MISSING(key);
  int64_t out = 0;
  if (!v->is_integer()) return STRATA_GGUF_WRONG(key, *v, "an integer");
  if (!v->as_int(&out))
    return err("gguf: %s: metadata key '%.*s' (%s) = %s does not fit in int64", path_.c_str(),
               static_cast<int>(key.size()), key.data(), gguf_value_type_name(v->type),
               v->to_display().c_str());
  return out;
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return STRATA_GGUF_MISSING(key);
  double out = 0;
  if (!v->as_float(&out)) return STRATA_GGUF_WRONG(key, *v, "a number (f32/f64 or integer)");
  return out;
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return STRATA_GGUF_MISSING(key);
  const bool* b = v->type == GgufValueType::boolean ? std::get_if<bool>(&v->v) : nullptr;
  if (!b) return STRATA_GGUF_WRONG(key, *v, "bool");
  return *b;
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return STRATA_GGUF_MISSING(key);
  const std::string* s = v->as_string();
  if (!s) return STRATA_GGUF_WRONG(key, *v, "string");
  return *s;
}

const GgufArray* GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_array() : nullptr;
}

Result<int64_t> GgufFile::get_int_or(std::string_view key, int64_t dflt) const {
  if (!find(key)) return dflt;
  return get_int(key);
}

Result<double> GgufFile::get_float_or(std::string_view key, double dflt) const {
  if (!find(key)) return dflt;
  return get_float(key);
}

Result<bool> GgufFile::get_bool_or(std::string_view key, bool dflt) const {
  if (!find(key)) return dflt;
  return get_bool(key);
}

Result<std::string> GgufFile::get_string_or(std::string_view key, std::string dflt) const {
  if (!find(key)) return dflt;
  return get_string(key);
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return STRATA_GGUF_MISSING(key);
  const GgufArray* a = v->as_array();
  if (!a) return STRATA_GGUF_WRONG(key, *v, "an array of integers");
  std::vector<int64_t> out(a->items.size());
  for (size_t i = 0; i < a->items.size(); ++i) {
    if (!a->items[i].is_integer()) return STRATA_GGUF_WRONG(key, *v, "an array of integers");
    if (!a->items[i].as_int(&out[i]))
      return err("gguf: %s: metadata key '%.*s' element %zu does not fit in int64", path_.c_str(),
                 static_cast<int>(key.size()), key.data(), i);
  }
  return out;
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return STRATA_GGUF_MISSING(key);
  const GgufArray* a = v->as_array();
  if (!a) return STRATA_GGUF_WRONG(key, *v, "an array of numbers");
  std::vector<float> out(a->items.size());
  for (size_t i = 0; i < a->items.size(); ++i) {
    double d = 0;
    if (!a->items[i].as_float(&d)) return STRATA_GGUF_WRONG(key, *v, "an array of numbers");
    out[i] = static_cast<float>(d);
  }
  return out;
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return STRATA_GGUF_MISSING(key);
  const GgufArray* a = v->as_array();
  if (!a || a->elem_type != GgufValueType::string) return STRATA_GGUF_WRONG(key, *v, "an array of strings");
  std::vector<std::string> out;
  out.reserve(a->items.size());
  for (const GgufValue& item : a->items) {
    const std::string* s = item.as_string();
    if (!s) return STRATA_GGUF_WRONG(key, *v, "an array of strings");
    out.push_back(*s);
  }
  return out;
}

#undef STRATA_GGUF_MISSING
#undef STRATA_GGUF_WRONG

}  // namespace strata
