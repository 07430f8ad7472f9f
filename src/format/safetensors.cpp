// safetensors reader: mmap + one validating pass over the JSON header (see safetensors.h).
#include "format/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

namespace strata {

namespace {

struct DtypeInfo {
  StDtype t;
  const char* name;
  size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {StDtype::f64, "F64", 8},         {StDtype::f32, "F32", 4},         {StDtype::f16, "F16", 2},
    {StDtype::bf16, "BF16", 2},       {StDtype::f8_e4m3, "F8_E4M3", 1}, {StDtype::f8_e5m2, "F8_E5M2", 1},
    {StDtype::f8_e8m0, "F8_E8M0", 1}, {StDtype::i64, "I64", 8},         {StDtype::i32, "I32", 4},
    {StDtype::i16, "I16", 2},         {StDtype::i8, "I8", 1},           {StDtype::u64, "U64", 8},
    {StDtype::u32, "U32", 4},         {StDtype::u16, "U16", 2},         {StDtype::u8, "U8", 1},
    {StDtype::boolean, "BOOL", 1},
};

// A header larger than this is not a model header (the V4.1 shards have ~100 KB headers);
// bounds the memory a hostile file can make us allocate.
constexpr uint64_t kMaxHeaderBytes = 256ull << 20;
constexpr size_t kMaxDims = 8;
constexpr int64_t kMaxElements = int64_t{1} << 62;

}  // namespace

const char* st_dtype_name(StDtype t) {
  for (const auto& d : kDtypes)
    if (d.t == t) return d.name;
  return "?";
}

size_t st_dtype_size(StDtype t) {
  for (const auto& d : kDtypes)
    if (d.t == t) return d.size;
  return 0;
}

bool st_dtype_parse(std::string_view s, StDtype* out) {
  for (const auto& d : kDtypes) {
    if (s == d.name) {
      *out = d.t;
      return true;
    }
  }
  // Aliases written by some tools.
  if (s == "F8_E4M3FN") {
    *out = StDtype::f8_e4m3;
    return true;
  }
  if (s == "F8_E8M0FNU") {
    *out = StDtype::f8_e8m0;
    return true;
  }
  return false;
}

int64_t StTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string StTensor::shape_string() const {
  std::string s = std::string(st_dtype_name(dtype)) + " [";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, size_);
}

void SafetensorsFile::drop_resident_pages() const {
  if (map_) ::madvise(map_, size_, MADV_DONTNEED);  // advisory: a failure only keeps pages resident
}

void SafetensorsFile::drop_resident_pages(const StTensor& t) const {
  const auto base = reinterpret_cast<uintptr_t>(map_), p = reinterpret_cast<uintptr_t>(t.data);
  if (!map_ || t.nbytes == 0 || p < base || p + t.nbytes > base + size_) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t a = p & ~(page - 1), b = std::min(base + size_, (p + t.nbytes + page - 1) & ~(page - 1));
  ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);  // advisory, as above
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err("safetensors: cannot open '%s': %s", path.c_str(), std::strerror(errno));
  struct stat sb {};
  if (fstat(fd, &sb) != 0) {
    const int e = errno;
    ::close(fd);
    return err("safetensors: cannot stat '%s': %s", path.c_str(), std::strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    ::close(fd);
    return err("safetensors: '%s' is not a regular file", path.c_str());
  }
  const size_t size = static_cast<size_t>(sb.st_size);
  if (size < 8) {
    ::close(fd);
    return err("safetensors: %s: file is %zu bytes, shorter than the 8-byte header length", path.c_str(),
               size);
  }
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (p == MAP_FAILED)
    return err("safetensors: cannot mmap '%s' (%zu bytes): %s", path.c_str(), size, std::strerror(map_errno));
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_ = p;
  f->base_ = static_cast<const uint8_t*>(p);
  f->size_ = size;
  STRATA_TRY(f->parse());
  return f;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::from_memory(const void* data, size_t size,
                                                                      const std::string& label) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = label;
  f->base_ = static_cast<const uint8_t*>(data);
  f->size_ = size;
  if (size < 8)
    return err("safetensors: %s: file is %zu bytes, shorter than the 8-byte header length", label.c_str(),
               size);
  STRATA_TRY(f->parse());
  return f;
}

const StTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsFile::parse() {
  const char* P = path_.c_str();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base_[i];
  if (n > size_ - 8)
    return err("safetensors: %s: header length %llu exceeds the file (%zu bytes after the length field)", P,
               static_cast<unsigned long long>(n), size_ - 8);
  if (n > kMaxHeaderBytes)
    return err("safetensors: %s: header length %llu is larger than the %llu-byte limit", P,
               static_cast<unsigned long long>(n), static_cast<unsigned long long>(kMaxHeaderBytes));
  if (n < 2)
    return err("safetensors: %s: header length %llu is too short for a JSON object", P,
               static_cast<unsigned long long>(n));
  const char* hdr = reinterpret_cast<const char*>(base_ + 8);
  const size_t data_start = 8 + static_cast<size_t>(n);
  const size_t data_size = size_ - data_start;

  // Duplicate top-level keys: nlohmann keeps the last one silently; we refuse them.
  std::set<std::string> seen;
  std::string duplicate;
  auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    if (depth == 1 && ev == nlohmann::json::parse_event_t::key && parsed.is_string()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(hdr, hdr + n, cb);
  } catch (const nlohmann::json::exception& e) {
    return err("safetensors: %s: header is not valid JSON: %s", P, e.what());
  }
  if (!duplicate.empty())
    return err("safetensors: %s: tensor '%s' appears twice in the header", P, duplicate.c_str());
  if (!j.is_object()) return err("safetensors: %s: header is not a JSON object", P);

  struct Range {
    size_t b, e;
    size_t idx;
  };
  std::vector<Range> ranges;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return err("safetensors: %s: __metadata__ is not an object", P);
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return err("safetensors: %s: __metadata__ value '%s' is not a string", P, m.key().c_str());
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const char* N = name.c_str();
    if (name.empty()) return err("safetensors: %s: a tensor has an empty name", P);
    if (!v.is_object()) return err("safetensors: %s: tensor '%s': entry is not an object", P, N);
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string())
      return err("safetensors: %s: tensor '%s': missing or non-string dtype", P, N);
    if (sh == v.end() || !sh->is_array())
      return err("safetensors: %s: tensor '%s': missing or non-array shape", P, N);
    if (off == v.end() || !off->is_array() || off->size() != 2)
      return err("safetensors: %s: tensor '%s': data_offsets must be an array of 2 integers", P, N);
    StTensor t;
    t.name = name;
    const std::string dts = dt->get<std::string>();
    if (!st_dtype_parse(dts, &t.dtype))
      return err("safetensors: %s: tensor '%s': unknown dtype '%s'", P, N, dts.c_str());
    if (sh->size() > kMaxDims)
      return err("safetensors: %s: tensor '%s': %zu dims (at most %zu)", P, N, sh->size(), kMaxDims);
    int64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return err("safetensors: %s: tensor '%s': shape entries must be non-negative integers", P, N);
      const int64_t x = d.get<int64_t>();
      if (x != 0 && numel > kMaxElements / x)
        return err("safetensors: %s: tensor '%s': shape product overflows", P, N);
      numel *= x;
      t.shape.push_back(x);
    }
    for (const auto& o : *off) {
      if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0))
        return err("safetensors: %s: tensor '%s': data_offsets must be non-negative integers", P, N);
    }
    const uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
    if (b > e)
      return err("safetensors: %s: tensor '%s': data_offsets [%llu, %llu] begin after end", P, N,
                 static_cast<unsigned long long>(b), static_cast<unsigned long long>(e));
    if (e > data_size)
      return err(
          "safetensors: %s: tensor '%s': data_offsets [%llu, %llu] run past the data region (%zu bytes)", P,
          N, static_cast<unsigned long long>(b), static_cast<unsigned long long>(e), data_size);
    const uint64_t want = static_cast<uint64_t>(numel) * st_dtype_size(t.dtype);
    if (e - b != want)
      return err("safetensors: %s: tensor '%s': %s needs %llu bytes but data_offsets [%llu, %llu] hold %llu",
                 P, N, t.shape_string().c_str(), static_cast<unsigned long long>(want),
                 static_cast<unsigned long long>(b), static_cast<unsigned long long>(e),
                 static_cast<unsigned long long>(e - b));
    t.offset = data_start + static_cast<size_t>(b);
    t.nbytes = static_cast<size_t>(e - b);
    t.data = base_ + t.offset;
    ranges.push_back({static_cast<size_t>(b), static_cast<size_t>(e), tensors_.size()});
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  // Non-overlap (empty tensors occupy nothing and may sit anywhere).
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.b < b.b; });
  const Range* prev = nullptr;
  for (const Range& r : ranges) {
    if (r.b == r.e) continue;
    if (prev && r.b < prev->e)
      return err("safetensors: %s: tensors '%s' [%zu, %zu) and '%s' [%zu, %zu) overlap", P,
                 tensors_[prev->idx].name.c_str(), prev->b, prev->e, tensors_[r.idx].name.c_str(), r.b, r.e);
    prev = &r;
  }
  return {};
}

}  // namespace strata
