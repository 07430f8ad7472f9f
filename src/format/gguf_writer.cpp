// GGUF v3 writer. Layout matches llama.cpp's gguf_write_to_file: header, metadata, tensor infos,
// padding to the alignment, then each tensor's data followed by padding to the alignment; the
// offsets are consecutive (offset[i+1] = offset[i] + pad(nbytes[i])), which llama.cpp requires.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "format/gguf.h"
#include "format/gguf_spec.h"

namespace strata {

using namespace gguf_spec;

struct GgufWriter::Sink {
  virtual ~Sink() = default;
  virtual bool put(const void* p, size_t n) = 0;
};

namespace {

struct MemorySink : GgufWriter::Sink {
  std::vector<uint8_t>* out;
  explicit MemorySink(std::vector<uint8_t>* o) : out(o) {}
  bool put(const void* p, size_t n) override {
    const auto* b = static_cast<const uint8_t*>(p);
    out->insert(out->end(), b, b + n);
    return true;
  }
};

struct FileSink : GgufWriter::Sink {
  FILE* f;
  int error = 0;  // errno of the first failed write
  explicit FileSink(FILE* file) : f(file) {}
  bool put(const void* p, size_t n) override {
    if (n == 0 || std::fwrite(p, 1, n, f) == n) return true;
    if (!error) error = errno ? errno : EIO;
    return false;
  }
};

// Serialises metadata into a byte buffer, validating each value against its on-disk type.
class Encoder {
 public:
  std::vector<uint8_t> buf;

  template <class T>
  void put(T x) {
    const auto* b = reinterpret_cast<const uint8_t*>(&x);
    buf.insert(buf.end(), b, b + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    buf.insert(buf.end(), s.begin(), s.end());
  }

  Status value(const GgufValue& v, const std::string& key, int depth) {
    switch (v.type) {
      case GgufValueType::u8:
        return uint_value<uint8_t>(v, key);
      case GgufValueType::u16:
        return uint_value<uint16_t>(v, key);
      case GgufValueType::u32:
        return uint_value<uint32_t>(v, key);
      case GgufValueType::u64:
        return uint_value<uint64_t>(v, key);
      case GgufValueType::i8:
        return int_value<int8_t>(v, key);
      case GgufValueType::i16:
        return int_value<int16_t>(v, key);
      case GgufValueType::i32:
        return int_value<int32_t>(v, key);
      case GgufValueType::i64:
        return int_value<int64_t>(v, key);
      case GgufValueType::f32:
      case GgufValueType::f64: {
        const auto* d = std::get_if<double>(&v.v);
        if (!d) return bad(key, v, "does not hold a double");
        if (v.type == GgufValueType::f32)
          put<float>(static_cast<float>(*d));
        else
          put<double>(*d);
        return {};
      }
      case GgufValueType::boolean: {
        const auto* b = std::get_if<bool>(&v.v);
        if (!b) return bad(key, v, "does not hold a bool");
        put<uint8_t>(*b ? 1 : 0);
        return {};
      }
      case GgufValueType::string: {
        const auto* s = std::get_if<std::string>(&v.v);
        if (!s) return bad(key, v, "does not hold a string");
        put_string(*s);
        return {};
      }
      case GgufValueType::array: {
        const GgufArray* a = v.as_array();
        if (!a) return bad(key, v, "holds no array");
        if (depth >= kMaxArrayDepth)
          return err("gguf writer: key '%s': arrays nested deeper than %d", key.c_str(), kMaxArrayDepth);
        if (!value_type_valid(static_cast<uint32_t>(a->elem_type)))
          return err("gguf writer: key '%s': invalid array element type %u", key.c_str(),
                     static_cast<uint32_t>(a->elem_type));
        put<uint32_t>(static_cast<uint32_t>(a->elem_type));
        put<uint64_t>(a->items.size());
        for (size_t i = 0; i < a->items.size(); ++i) {
          if (a->items[i].type != a->elem_type)
            return err("gguf writer: key '%s': array element %zu has type %s in an array of %s", key.c_str(),
                       i, gguf_value_type_name(a->items[i].type), gguf_value_type_name(a->elem_type));
          STRATA_TRY(value(a->items[i], key, depth + 1));
        }
        return {};
      }
    }
    return err("gguf writer: key '%s': invalid value type %u", key.c_str(), static_cast<uint32_t>(v.type));
  }

 private:
  static Error bad(const std::string& key, const GgufValue& v, const char* what) {
    return err("gguf writer: key '%s' of type %s %s", key.c_str(), gguf_value_type_name(v.type), what);
  }

  template <class T>
  Status uint_value(const GgufValue& v, const std::string& key) {
    uint64_t x = 0;
    if (const auto* u = std::get_if<uint64_t>(&v.v)) {
      x = *u;
    } else if (const auto* i = std::get_if<int64_t>(&v.v); i && *i >= 0) {
      x = static_cast<uint64_t>(*i);
    } else {
      return bad(key, v, "does not hold a non-negative integer");
    }
    if (x > std::numeric_limits<T>::max())
      return err("gguf writer: key '%s': value %llu does not fit in %s", key.c_str(),
                 static_cast<unsigned long long>(x), gguf_value_type_name(v.type));
    put<T>(static_cast<T>(x));
    return {};
  }

  template <class T>
  Status int_value(const GgufValue& v, const std::string& key) {
    int64_t x = 0;
    if (const auto* i = std::get_if<int64_t>(&v.v)) {
      x = *i;
    } else if (const auto* u = std::get_if<uint64_t>(&v.v);
               u && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      x = static_cast<int64_t>(*u);
    } else {
      return bad(key, v, "does not hold an int64 value");
    }
    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
      return err("gguf writer: key '%s': value %lld does not fit in %s", key.c_str(),
                 static_cast<long long>(x), gguf_value_type_name(v.type));
    put<T>(static_cast<T>(x));
    return {};
  }
};

uint64_t pad_to(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

}  // namespace

GgufWriter::GgufWriter() = default;

void GgufWriter::set_value(const std::string& key, GgufValue v) {
  // Keep the data layout in step with the key however it was set (write() re-checks it).
  if (key == kAlignmentKey && v.type == GgufValueType::u32 && std::holds_alternative<uint64_t>(v.v) &&
      std::get<uint64_t>(v.v) <= std::numeric_limits<uint32_t>::max())
    alignment_ = static_cast<uint32_t>(std::get<uint64_t>(v.v));
  for (GgufKv& kv : kvs_) {
    if (kv.key == key) {
      kv.value = std::move(v);
      return;
    }
  }
  kvs_.push_back(GgufKv{key, std::move(v)});
}

void GgufWriter::set_u32(const std::string& key, uint32_t v) {
  set_value(key, gguf_make_int(GgufValueType::u32, v));
}
void GgufWriter::set_i32(const std::string& key, int32_t v) {
  set_value(key, gguf_make_int(GgufValueType::i32, v));
}
void GgufWriter::set_u64(const std::string& key, uint64_t v) {
  set_value(key, gguf_make_u64(v));
}
void GgufWriter::set_f32(const std::string& key, float v) {
  set_value(key, gguf_make_float(GgufValueType::f32, v));
}
void GgufWriter::set_bool(const std::string& key, bool v) {
  set_value(key, gguf_make_bool(v));
}
void GgufWriter::set_string(const std::string& key, const std::string& v) {
  set_value(key, gguf_make_string(v));
}

void GgufWriter::set_array_i32(const std::string& key, const std::vector<int32_t>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (int32_t x : v) items.push_back(gguf_make_int(GgufValueType::i32, x));
  set_value(key, gguf_make_array(GgufValueType::i32, std::move(items)));
}

void GgufWriter::set_array_u32(const std::string& key, const std::vector<uint32_t>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (uint32_t x : v) items.push_back(gguf_make_int(GgufValueType::u32, x));
  set_value(key, gguf_make_array(GgufValueType::u32, std::move(items)));
}

void GgufWriter::set_array_f32(const std::string& key, const std::vector<float>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (float x : v) items.push_back(gguf_make_float(GgufValueType::f32, x));
  set_value(key, gguf_make_array(GgufValueType::f32, std::move(items)));
}

void GgufWriter::set_array_string(const std::string& key, const std::vector<std::string>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (const std::string& x : v) items.push_back(gguf_make_string(x));
  set_value(key, gguf_make_array(GgufValueType::string, std::move(items)));
}

void GgufWriter::set_alignment(uint32_t a) {
  set_u32(kAlignmentKey, a);
}

Status GgufWriter::add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                              const void* data) {
  return add_pending(name, type, ne, data, nullptr);
}

Status GgufWriter::add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                              TensorFill fill) {
  if (!fill) return err("gguf writer: tensor '%s': no fill function", name.c_str());
  return add_pending(name, type, ne, nullptr, std::move(fill));
}

Status GgufWriter::add_pending(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                               const void* data, TensorFill fill) {
  const char* nm = name.c_str();
  if (name.empty()) return err("gguf writer: empty tensor name");
  if (name.size() > kMaxTensorNameLlama)
    return err("gguf writer: tensor name '%s' is %zu bytes; llama.cpp accepts at most %zu", nm, name.size(),
               kMaxTensorNameLlama);
  for (const PendingTensor& t : tensors_)
    if (t.name == name) return err("gguf writer: duplicate tensor name '%s'", nm);
  const TypeInfo& ti = type_info(type);
  if (!ti.known || static_cast<uint32_t>(type) == static_cast<uint32_t>(GgmlType::fp8_e4m3))
    return err("gguf writer: tensor '%s': unknown type id %u", nm, static_cast<uint32_t>(type));
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims))
    return err("gguf writer: tensor '%s' has %zu dimensions (1..%d)", nm, ne.size(), kMaxDims);
  // Same bound as the reader: the product with zero dims counted as 1 must fit in int64.
  uint64_t n_el = 1, span = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0)
      return err("gguf writer: tensor '%s' dimension %zu is %lld", nm, d, static_cast<long long>(ne[d]));
    n_el *= static_cast<uint64_t>(ne[d]);  // <= span, cannot overflow once span is checked
    if (__builtin_mul_overflow(span, static_cast<uint64_t>(ne[d] > 0 ? ne[d] : 1), &span) ||
        span > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return err("gguf writer: tensor '%s': element count overflows int64", nm);
  }
  if (ne[0] % ti.block_size != 0)
    return err("gguf writer: tensor '%s': ne[0] = %lld is not a multiple of the %s block size %lld", nm,
               static_cast<long long>(ne[0]), ti.name, static_cast<long long>(ti.block_size));
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(
          (span + static_cast<uint64_t>(ti.block_size) - 1) / static_cast<uint64_t>(ti.block_size),
          ti.type_size, &nbytes))
    return err("gguf writer: tensor '%s': byte size overflows", nm);
  if (n_el == 0) nbytes = 0;
  if (nbytes && !data && !fill)
    return err("gguf writer: tensor '%s': null data for %llu bytes", nm,
               static_cast<unsigned long long>(nbytes));
  tensors_.push_back(PendingTensor{name, type, ne, data, static_cast<size_t>(nbytes), std::move(fill)});
  return {};
}

Status GgufWriter::write_impl(Sink* sink) const {
  if (!is_pow2(alignment_))
    return err("gguf writer: alignment %u is not a non-zero power of two", alignment_);
  Encoder enc;
  enc.put<uint32_t>(kMagic);
  enc.put<uint32_t>(kWriteVersion);
  enc.put<uint64_t>(tensors_.size());
  enc.put<uint64_t>(kvs_.size());
  std::set<std::string> seen;
  for (const GgufKv& kv : kvs_) {
    if (kv.key.empty()) return err("gguf writer: empty metadata key");
    if (!seen.insert(kv.key).second) return err("gguf writer: duplicate metadata key '%s'", kv.key.c_str());
    if (kv.key == kAlignmentKey &&
        (kv.value.type != GgufValueType::u32 || !std::holds_alternative<uint64_t>(kv.value.v) ||
         std::get<uint64_t>(kv.value.v) != alignment_))
      return err("gguf writer: key '%s' must be a u32 equal to the writer's alignment %u (use set_alignment)",
                 kAlignmentKey, alignment_);
    enc.put_string(kv.key);
    enc.put<uint32_t>(static_cast<uint32_t>(kv.value.type));
    STRATA_TRY(enc.value(kv.value, kv.key, 0));
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    enc.put_string(t.name);
    enc.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) enc.put<int64_t>(n);
    enc.put<uint32_t>(static_cast<uint32_t>(t.type));
    enc.put<uint64_t>(offset);
    offset += pad_to(t.nbytes, alignment_);
  }
  enc.buf.resize(pad_to(enc.buf.size(), alignment_), 0);
  if (!sink->put(enc.buf.data(), enc.buf.size())) return err("gguf writer: write failed (header)");
  static const uint8_t kZeros[256] = {};
  std::vector<uint8_t> filled;  // reused by the tensors produced at write time
  for (const PendingTensor& t : tensors_) {
    const void* data = t.data;
    if (t.fill) {
      filled.resize(t.nbytes);
      STRATA_TRY(t.fill(filled.data(), t.nbytes));
      data = filled.data();
    }
    if (!sink->put(data, t.nbytes)) return err("gguf writer: write failed (tensor '%s')", t.name.c_str());
    for (size_t pad = pad_to(t.nbytes, alignment_) - t.nbytes; pad > 0;) {
      const size_t n = pad < sizeof kZeros ? pad : sizeof kZeros;
      if (!sink->put(kZeros, n)) return err("gguf writer: write failed (padding)");
      pad -= n;
    }
  }
  return {};
}

Status GgufWriter::write_to_memory(std::vector<uint8_t>* out) const {
  out->clear();
  MemorySink sink(out);
  return write_impl(&sink);
}

Status GgufWriter::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return err("gguf writer: cannot create '%s': %s", tmp.c_str(), std::strerror(errno));
  FileSink sink(f);
  Status st = write_impl(&sink);
  if (!st.ok() && sink.error) st = err("%s: %s", st.message().c_str(), std::strerror(sink.error));
  if (std::fclose(f) != 0 && st.ok())
    st = err("gguf writer: closing '%s' failed: %s", tmp.c_str(), std::strerror(errno));
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = err("gguf writer: cannot rename '%s' to '%s': %s", tmp.c_str(), path.c_str(), std::strerror(errno));
  if (!st.ok()) {
    std::remove(tmp.c_str());
    return err("%s (writing '%s')", st.message().c_str(), path.c_str());
  }
  return {};
}

}  // namespace strata
