// GGUF reader: mmap (or a caller's buffer) + one validating pass. Every count and length is
// checked against the bytes that remain before anything is allocated, so a hostile file can
// neither read out of bounds nor make us allocate more than a small multiple of its size.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <limits>

#include "format/gguf.h"
#include "format/gguf_spec.h"

namespace strata {
namespace {

using namespace gguf_spec;

// Bounds-checked little-endian cursor over [base, base + size). Errors carry the byte offset.
class Cursor {
 public:
  Cursor(const uint8_t* base, size_t size, const std::string& name) : base_(base), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& name() const { return name_; }

#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  Error
  fail(const char* fmt, ...) const {
    va_list ap;
    va_start(ap, fmt);
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return Error{"gguf: " + name_ + ": " + buf};
  }

  Status need(size_t n, const char* what) const {
    if (n > remaining())
      return fail("truncated: %s needs %zu bytes at offset %zu, but the file ends at %zu", what, n, pos_,
                  size_);
    return {};
  }

  template <class T>
  Status read(T* out, const char* what) {
    STRATA_TRY(need(sizeof(T), what));
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string* out, const char* what) {
    const size_t at = pos_;
    uint64_t len = 0;
    STRATA_TRY(read(&len, what));
    if (len > remaining()) {
      Error e = fail("truncated: %s at offset %zu has length %llu, but only %zu bytes remain in the file",
                     what, at, static_cast<unsigned long long>(len), remaining());
      pos_ = at;
      return e;
    }
    out->assign(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return {};
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

// Reads metadata values; counts every value against kMaxMetadataValues.
class ValueParser {
 public:
  explicit ValueParser(Cursor* c) : c_(c) {}

  Status read_value(GgufValueType t, const std::string& key, int depth, GgufValue* out) {
    if (++n_values_ > kMaxMetadataValues)
      return c_->fail("metadata of key '%s' at offset %zu: more than %llu metadata values in the file",
                      key.c_str(), c_->pos(), static_cast<unsigned long long>(kMaxMetadataValues));
    out->type = t;
    switch (t) {
      case GgufValueType::u8:
        return read_scalar<uint8_t, uint64_t>(key, out);
      case GgufValueType::i8:
        return read_scalar<int8_t, int64_t>(key, out);
      case GgufValueType::u16:
        return read_scalar<uint16_t, uint64_t>(key, out);
      case GgufValueType::i16:
        return read_scalar<int16_t, int64_t>(key, out);
      case GgufValueType::u32:
        return read_scalar<uint32_t, uint64_t>(key, out);
      case GgufValueType::i32:
        return read_scalar<int32_t, int64_t>(key, out);
      case GgufValueType::u64:
        return read_scalar<uint64_t, uint64_t>(key, out);
      case GgufValueType::i64:
        return read_scalar<int64_t, int64_t>(key, out);
      case GgufValueType::f32:
        return read_scalar<float, double>(key, out);
      case GgufValueType::f64:
        return read_scalar<double, double>(key, out);
      case GgufValueType::boolean: {
        const size_t at = c_->pos();
        uint8_t b = 0;
        STRATA_TRY(c_->read(&b, "a bool value"));
        if (b > 1)
          return c_->fail("bool value of key '%s' at offset %zu is %u, not 0 or 1", key.c_str(), at, b);
        out->v = b != 0;
        return {};
      }
      case GgufValueType::string: {
        std::string s;
        STRATA_TRY(c_->read_string(&s, "a string value"));
        out->v = std::move(s);
        return {};
      }
      case GgufValueType::array:
        return read_array(key, depth, out);
    }
    return c_->fail("key '%s': unknown value type %u at offset %zu", key.c_str(), static_cast<uint32_t>(t),
                    c_->pos());
  }

 private:
  template <class Disk, class Wide>
  Status read_scalar(const std::string& key, GgufValue* out) {
    Disk x{};
    STRATA_TRY(c_->read(&x, "a metadata value"));
    out->v = static_cast<Wide>(x);
    return {};
  }

  Status read_array(const std::string& key, int depth, GgufValue* out) {
    const size_t at = c_->pos();
    if (depth >= kMaxArrayDepth)
      return c_->fail("key '%s': arrays nested deeper than %d at offset %zu", key.c_str(), kMaxArrayDepth,
                      at);
    uint32_t et = 0;
    uint64_t n = 0;
    STRATA_TRY(c_->read(&et, "an array element type"));
    if (!value_type_valid(et))
      return c_->fail("key '%s': array at offset %zu has unknown element type %u", key.c_str(), at, et);
    STRATA_TRY(c_->read(&n, "an array length"));
    const auto elem = static_cast<GgufValueType>(et);
    const size_t min = min_value_size(elem);
    // Check the count against the bytes left before reserving: a count of 2^60 must not allocate.
    if (n > c_->remaining() / min)
      return c_->fail(
          "key '%s': array at offset %zu has %llu elements of type %s (at least %zu bytes each), "
          "but only %zu bytes remain in the file",
          key.c_str(), at, static_cast<unsigned long long>(n), gguf_value_type_name(elem), min,
          c_->remaining());
    if (n > kMaxMetadataValues - n_values_)
      return c_->fail(
          "key '%s': array at offset %zu has %llu elements: more than %llu metadata values in the file",
          key.c_str(), at, static_cast<unsigned long long>(n),
          static_cast<unsigned long long>(kMaxMetadataValues));
    auto arr = std::make_shared<GgufArray>();
    arr->elem_type = elem;
    arr->items.resize(static_cast<size_t>(n));
    for (auto& item : arr->items) {
      // An element of an array of arrays is a complete array value (its own type and count).
      STRATA_TRY(read_value(elem, key, depth + 1, &item));
    }
    out->v = std::move(arr);
    return {};
  }

  Cursor* c_;
  uint64_t n_values_ = 0;
};

struct RawTensorInfo {
  std::string name;
  size_t info_offset;  // where its info record starts (for messages)
  uint32_t n_dims;
  int64_t ne[kMaxDims];
  uint32_t type;
  uint64_t offset;
};

// Overflow-checked a*b for non-negative values.
bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

}  // namespace

GgufFile::~GgufFile() {
  if (mapped_ && base_) munmap(const_cast<uint8_t*>(base_), size_);
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  STRATA_ASSIGN(std::unique_ptr<GgufFile> f, open_one(path));
  STRATA_TRY(f->join_shards());
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open_one(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err("gguf: cannot open '%s': %s", path.c_str(), std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return err("gguf: cannot stat '%s': %s", path.c_str(), std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return err("gguf: '%s' is not a regular file", path.c_str());
  }
  if (st.st_size == 0) {
    ::close(fd);
    return err("gguf: %s: file is empty (0 bytes), not a GGUF file", path.c_str());
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (p == MAP_FAILED)
    return err("gguf: cannot mmap '%s' (%zu bytes): %s", path.c_str(), size, std::strerror(map_errno));
  f->base_ = static_cast<const uint8_t*>(p);
  f->size_ = size;
  f->mapped_ = true;
  STRATA_TRY(f->parse());
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::from_memory(const void* data, size_t size, std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(name);
  if (!data && size) return err("gguf: %s: null buffer of %zu bytes", f->path_.c_str(), size);
  f->base_ = static_cast<const uint8_t*>(data);
  f->size_ = size;
  STRATA_TRY(f->parse());
  return f;
}

Status GgufFile::parse() {
  static const uint8_t kEmpty[1] = {0};
  Cursor c(base_ ? base_ : kEmpty, base_ ? size_ : 0, path_);

  // Header.
  uint32_t magic = 0;
  STRATA_TRY(c.read(&magic, "the magic"));
  if (magic != kMagic) {
    const uint8_t* m = base_;
    return c.fail("bad magic at offset 0: bytes %02x %02x %02x %02x, expected 47 47 55 46 (\"GGUF\")", m[0],
                  m[1], m[2], m[3]);
  }
  STRATA_TRY(c.read(&version_, "the version"));
  if (version_ == 1)
    return c.fail("unsupported version 1 at offset 4 (GGUF v1 is obsolete; supported: 2, 3)");
  if (version_ != 0 && (version_ & 0xFFFF) == 0)
    return c.fail(
        "unsupported version 0x%08x at offset 4 (a big-endian GGUF file? only little-endian is supported)",
        version_);
  if (version_ < kVersionMin || version_ > kVersionMax)
    return c.fail("unsupported version %u at offset 4 (supported: 2, 3)", version_);

  uint64_t n_tensors = 0, n_kv = 0;
  STRATA_TRY(c.read(&n_tensors, "the tensor count"));
  STRATA_TRY(c.read(&n_kv, "the metadata count"));
  // Minimum on-disk sizes: kv = key length(8) + type(4) + 1-byte value; tensor info = name
  // length(8) + n_dims(4) + type(4) + offset(8).
  if (n_kv > c.remaining() / 13)
    return c.fail("metadata count %llu at offset 16 is impossible: %zu bytes remain after the header",
                  static_cast<unsigned long long>(n_kv), c.remaining());
  if (n_tensors > c.remaining() / 24)
    return c.fail("tensor count %llu at offset 8 is impossible: %zu bytes remain after the header",
                  static_cast<unsigned long long>(n_tensors), c.remaining());

  // Metadata.
  ValueParser vp(&c);
  kvs_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t at = c.pos();
    GgufKv kv;
    STRATA_TRY(c.read_string(&kv.key, "a metadata key"));
    if (kv.key.empty())
      return c.fail("metadata key #%llu at offset %zu is empty", static_cast<unsigned long long>(i), at);
    if (kv_index_.count(kv.key))
      return c.fail("duplicate metadata key '%s' at offset %zu", kv.key.c_str(), at);
    const size_t type_at = c.pos();
    uint32_t t = 0;
    STRATA_TRY(c.read(&t, "a metadata value type"));
    if (!value_type_valid(t))
      return c.fail("metadata key '%s': unknown value type %u at offset %zu", kv.key.c_str(), t, type_at);
    STRATA_TRY(vp.read_value(static_cast<GgufValueType>(t), kv.key, 0, &kv.value));
    kv_index_.emplace(kv.key, kvs_.size());
    kvs_.push_back(std::move(kv));
  }

  // general.alignment: u32, a non-zero power of two (as llama.cpp requires).
  alignment_ = kDefaultAlignment;
  if (const GgufValue* a = find(kAlignmentKey)) {
    if (a->type != GgufValueType::u32)
      return c.fail("key '%s' must be u32 but is %s", kAlignmentKey, gguf_value_type_name(a->type));
    const uint64_t al = std::get<uint64_t>(a->v);
    if (!is_pow2(al))
      return c.fail("key '%s' = %llu is not a non-zero power of two", kAlignmentKey,
                    static_cast<unsigned long long>(al));
    alignment_ = al;
  }

  // Tensor infos.
  std::vector<RawTensorInfo> infos(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    RawTensorInfo& ti = infos[i];
    ti.info_offset = c.pos();
    STRATA_TRY(c.read_string(&ti.name, "a tensor name"));
    if (ti.name.empty())
      return c.fail("tensor #%llu at offset %zu has an empty name", static_cast<unsigned long long>(i),
                    ti.info_offset);
    if (tensor_index_.count(ti.name))
      return c.fail("duplicate tensor name '%s' at offset %zu", ti.name.c_str(), ti.info_offset);
    tensor_index_.emplace(ti.name, static_cast<size_t>(i));
    const char* nm = ti.name.c_str();
    const size_t dims_at = c.pos();
    STRATA_TRY(c.read(&ti.n_dims, "a tensor dimension count"));
    if (ti.n_dims > static_cast<uint32_t>(kMaxDims))
      return c.fail("tensor '%s' has %u dimensions at offset %zu (at most %d)", nm, ti.n_dims, dims_at,
                    kMaxDims);
    for (int d = 0; d < kMaxDims; ++d) ti.ne[d] = 1;
    for (uint32_t d = 0; d < ti.n_dims; ++d) {
      const size_t ne_at = c.pos();
      STRATA_TRY(c.read(&ti.ne[d], "a tensor dimension"));
      // 0 is allowed (an empty tensor), as llama.cpp allows it.
      if (ti.ne[d] < 0)
        return c.fail("tensor '%s' dimension %u is %lld at offset %zu (must be >= 0)", nm, d,
                      static_cast<long long>(ti.ne[d]), ne_at);
    }
    const size_t type_at = c.pos();
    STRATA_TRY(c.read(&ti.type, "a tensor type"));
    const TypeInfo& tinfo = type_info(ti.type);
    if (!tinfo.known || ti.type == static_cast<uint32_t>(GgmlType::fp8_e4m3))
      return c.fail("tensor '%s' has unknown type id %u at offset %zu", nm, ti.type, type_at);
    STRATA_TRY(c.read(&ti.offset, "a tensor data offset"));
    (void)type_at;
  }

  // The data section starts at the next multiple of the alignment after the infos.
  const size_t infos_end = c.pos();
  const uint64_t pad = (alignment_ - infos_end % alignment_) % alignment_;
  if (pad > std::numeric_limits<size_t>::max() - infos_end)
    return c.fail("data section offset overflows (alignment %llu)",
                  static_cast<unsigned long long>(alignment_));
  data_offset_ = infos_end + static_cast<size_t>(pad);
  if (n_tensors > 0 && data_offset_ > size_)
    return c.fail(
        "truncated: data section starts at offset %zu (after tensor infos ending at %zu, aligned to %llu), "
        "past the end of the file (size %zu)",
        data_offset_, infos_end, static_cast<unsigned long long>(alignment_), size_);

  // Shapes, sizes and data ranges.
  tensors_.reserve(infos.size());
  for (const RawTensorInfo& ti : infos) {
    const char* nm = ti.name.c_str();
    const TypeInfo& tinfo = type_info(ti.type);
    // The product is checked with zero dims counted as 1 as well: an empty tensor must still
    // have strides (nb[]) that fit in 64 bits.
    uint64_t span = 1;
    bool has_zero = false;
    for (int d = 0; d < kMaxDims; ++d) {
      has_zero |= ti.ne[d] == 0;
      if (!mul_ok(span, static_cast<uint64_t>(std::max<int64_t>(ti.ne[d], 1)), &span) ||
          span > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return c.fail(
            "tensor '%s' (info at offset %zu): element count of shape [%lld, %lld, %lld, %lld] overflows "
            "int64",
            nm, ti.info_offset, static_cast<long long>(ti.ne[0]), static_cast<long long>(ti.ne[1]),
            static_cast<long long>(ti.ne[2]), static_cast<long long>(ti.ne[3]));
    }
    if (ti.ne[0] % tinfo.block_size != 0)
      return c.fail(
          "tensor '%s' (info at offset %zu): ne[0] = %lld is not a multiple of the %s block size %lld", nm,
          ti.info_offset, static_cast<long long>(ti.ne[0]), tinfo.name,
          static_cast<long long>(tinfo.block_size));
    uint64_t span_bytes = 0;
    if (!mul_ok(
            (span + static_cast<uint64_t>(tinfo.block_size) - 1) / static_cast<uint64_t>(tinfo.block_size),
            tinfo.type_size, &span_bytes))
      return c.fail("tensor '%s' (info at offset %zu): byte size overflows", nm, ti.info_offset);
    const uint64_t nbytes = has_zero ? 0 : span_bytes;
    if (ti.offset % alignment_ != 0)
      return c.fail(
          "tensor '%s' (info at offset %zu): data offset %llu is not a multiple of the alignment %llu", nm,
          ti.info_offset, static_cast<unsigned long long>(ti.offset),
          static_cast<unsigned long long>(alignment_));
    const uint64_t avail = size_ - data_offset_;
    if (ti.offset > avail || nbytes > avail - ti.offset) {
      const unsigned long long begin = static_cast<unsigned long long>(data_offset_) + ti.offset;
      return c.fail("tensor '%s' data [%llu, %llu) extends past end of file (size %zu)", nm, begin,
                    begin + static_cast<unsigned long long>(nbytes), size_);
    }
    TensorView v;
    v.name = ti.name;
    v.type = static_cast<GgmlType>(ti.type);
    v.n_dims = static_cast<int>(ti.n_dims);
    for (int d = 0; d < kMaxDims; ++d) v.ne[d] = ti.ne[d];
    tensor_view_set_contiguous(&v);
    STRATA_ASSERT(v.nbytes == nbytes);
    v.data = base_ + data_offset_ + ti.offset;
    tensors_.push_back(std::move(v));
  }

  // No two tensors may share bytes (zero-size tensors occupy none).
  std::vector<size_t> order;
  for (size_t i = 0; i < infos.size(); ++i)
    if (tensors_[i].nbytes) order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return infos[a].offset < infos[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const size_t a = order[k - 1], b = order[k];
    const uint64_t a_end = infos[a].offset + tensors_[a].nbytes;
    if (a_end > infos[b].offset) {
      const unsigned long long d0 = data_offset_;
      return c.fail("tensors '%s' data [%llu, %llu) and '%s' data [%llu, %llu) overlap",
                    infos[a].name.c_str(), d0 + infos[a].offset, d0 + a_end, infos[b].name.c_str(),
                    d0 + infos[b].offset, d0 + infos[b].offset + tensors_[b].nbytes);
    }
  }
  return {};
}

}  // namespace strata
