// GGUF (v2, v3) reader and writer.
//
// GgufFile::open mmaps the file and validates everything up front (magic, version, counts and
// string lengths against the file size, metadata value types incl. nested arrays, tensor dims
// and their products, known tensor types, data ranges inside the file and not overlapping,
// unique names, alignment). Every error names the problem and the byte offset, prefixed with
// "gguf: <path>: ". After a successful open, accessors never read out of bounds.
//
// Rules beyond the format itself (see gguf_spec.h):
//   - general.alignment must be u32 and a non-zero power of two (as llama.cpp requires);
//   - arrays of arrays nest at most 8 deep; at most 2^24 metadata values per file (a bound on
//     the memory a hostile file can make us allocate);
//   - dims >= 0 (0 = an empty tensor, as llama.cpp allows), at most 4, products < 2^63;
//   - tensor offsets must be multiples of the alignment and ranges must not overlap; unlike
//     llama.cpp they need not be consecutive (llama.cpp's layout is what GgufWriter produces);
//   - bool values must be 0 or 1; keys and tensor names must be non-empty and unique.
// llama.cpp itself rejects nested arrays and tensor names of 64+ bytes; GgufWriter refuses such
// names, and writes nested arrays only if asked to.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "format/tensor_view.h"

namespace strata {

enum class GgufValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

struct GgufValue;
struct GgufArray {
  GgufValueType elem_type = GgufValueType::u8;
  std::vector<GgufValue> items;
};

// One metadata value. Scalars are stored widened; `type` keeps the on-disk type.
struct GgufValue {
  GgufValueType type = GgufValueType::u8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> v;

  bool is_integer() const;  // u8..i64 (not bool)
  bool is_float() const;    // f32, f64
  // Conversions that fail (return false) when the type does not fit.
  bool as_int(int64_t* out) const;
  bool as_float(double* out) const;  // integers convert too
  const std::string* as_string() const;
  const GgufArray* as_array() const;
  std::string to_display(size_t max_items = 8) const;  // for `strata inspect`
};

// Value constructors (storage convention: unsigned ints -> uint64_t, signed -> int64_t,
// f32/f64 -> double). gguf_make_int range-checks nothing: GgufWriter::write reports values that do
// not fit their on-disk type.
GgufValue gguf_make_int(GgufValueType t, int64_t v);  // t: u8..i64
GgufValue gguf_make_u64(uint64_t v);
GgufValue gguf_make_float(GgufValueType t, double v);  // t: f32 or f64
GgufValue gguf_make_bool(bool v);
GgufValue gguf_make_string(std::string v);
GgufValue gguf_make_array(GgufValueType elem_type, std::vector<GgufValue> items);
// Deep equality (same on-disk types and values, arrays element by element).
bool gguf_value_equal(const GgufValue& a, const GgufValue& b);

struct GgufKv {
  std::string key;
  GgufValue value;
};

class GgufFile {
 public:
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Parse a buffer the caller keeps alive (used by the fuzz target and tests).
  static Result<std::unique_ptr<GgufFile>> from_memory(const void* data, size_t size,
                                                       std::string name = "<memory>");
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;  // owns the mapping; tensor views point into it
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }  // start of the tensor data section
  size_t file_size() const { return size_; }

  // Metadata
  const std::vector<GgufKv>& metadata() const { return kvs_; }
  const GgufValue* find(std::string_view key) const;
  // Typed getters: Error names the key and expected vs actual type; missing key is an error.
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  const GgufArray* get_array(std::string_view key) const;  // nullptr if missing / not an array
  // With defaults when the key is absent (a present key of the wrong type is still an error).
  Result<int64_t> get_int_or(std::string_view key, int64_t dflt) const;
  Result<double> get_float_or(std::string_view key, double dflt) const;
  Result<bool> get_bool_or(std::string_view key, bool dflt) const;
  Result<std::string> get_string_or(std::string_view key, std::string dflt) const;
  // Arrays of numbers / strings (elements converted); error on wrong element type.
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;
  Result<std::vector<float>> get_float_array(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;

  // Tensors, in file order; data points into the mapping (of its shard, for a split model).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find_tensor(std::string_view name) const;

  // Split models (llama.cpp's gguf-split: "NAME-00001-of-0000N.gguf", keys split.count,
  // split.no, split.tensors.count): open() of the first shard opens the other N-1 beside it
  // and lists their tensors after its own, each a view into its shard's mapping; the metadata
  // is the first shard's. Opening a later shard, a missing shard, a shard whose split.no /
  // split.count disagree, a tensor in two shards or a total other than split.tensors.count is
  // an error naming the shard. from_memory never joins shards.
  int n_shards() const { return 1 + static_cast<int>(shards_.size()); }
  const GgufFile& shard(int i) const { return i == 0 ? *this : *shards_[i - 1]; }

 private:
  GgufFile() = default;
  Status parse();
  static Result<std::unique_ptr<GgufFile>> open_one(const std::string& path);
  Status join_shards();  // gguf_split.cpp

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  std::vector<std::unique_ptr<GgufFile>> shards_;  // shards 2..N of a split model
};

// "PREFIX-%05d-of-%05d.gguf" (llama.cpp's llama_split_path; shard_no counts from 0).
std::string gguf_split_path(const std::string& prefix, int shard_no, int n_shards);

// Writes `in` (all its tensors, every shard of it) as a split model PREFIX-0000k-of-0000N.gguf,
// as llama.cpp's gguf-split --split: a new shard starts when the current one holds max_tensors
// tensors or adding the next would pass max_bytes of tensor data (a shard holds at least one
// tensor); 0 = no limit. The first shard carries the metadata. Returns the shard paths.
struct GgufSplitOptions {
  int max_tensors = 0;
  uint64_t max_bytes = 0;
};
Result<std::vector<std::string>> gguf_write_split(const GgufFile& in, const std::string& prefix,
                                                  const GgufSplitOptions& opts);

// Writer: collect metadata and tensors, then write(path). Tensor data is copied at write time
// from the pointer given (which must stay valid until then), aligned to general.alignment.
class GgufWriter {
 public:
  GgufWriter();
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_value(const std::string& key, GgufValue v);  // any value incl. nested arrays
  void set_array_i32(const std::string& key, const std::vector<int32_t>& v);
  void set_array_u32(const std::string& key, const std::vector<uint32_t>& v);
  void set_array_f32(const std::string& key, const std::vector<float>& v);
  void set_array_string(const std::string& key, const std::vector<std::string>& v);
  void set_alignment(uint32_t a);  // writes general.alignment too
  // ne in ggml order (ne[0] contiguous); data holds row_bytes(type, ne[0]) * rows bytes.
  Status add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne, const void* data);
  // A tensor whose bytes are produced at write time, in file order, into a buffer of its size that
  // the writer reuses (one tensor in memory at a time: `strata quantize` of a model larger than
  // RAM). An error from fill stops the write (write() then leaves no file).
  using TensorFill = std::function<Status(uint8_t* dst, size_t nbytes)>;
  Status add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne, TensorFill fill);
  // Writes to path + ".tmp" then renames, so a failed write never leaves a half file at path.
  Status write(const std::string& path) const;
  // The same bytes, into memory (tests, fuzzing).
  Status write_to_memory(std::vector<uint8_t>* out) const;
  size_t n_tensors() const { return tensors_.size(); }
  struct Sink;  // byte output (file or memory); defined in gguf_writer.cpp

 private:
  Status write_impl(Sink* sink) const;
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    const void* data;
    size_t nbytes;
    TensorFill fill;  // set: data is produced at write time
  };
  Status add_pending(const std::string& name, GgmlType type, const std::vector<int64_t>& ne, const void* data,
                     TensorFill fill);
  std::vector<GgufKv> kvs_;
  std::vector<PendingTensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace strata
