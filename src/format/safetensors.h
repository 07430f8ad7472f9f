// safetensors reader (https://huggingface.co/docs/safetensors): 8-byte little-endian header
// length N, N bytes of JSON, then the data region. Each JSON entry (except "__metadata__") is
//   "name": {"dtype": "BF16", "shape": [out, in], "data_offsets": [begin, end]}
// with offsets relative to the data region.
//
// SafetensorsFile::open mmaps the file and validates everything up front, like GgufFile:
// header length inside the file, JSON well-formed and an object, every entry an object with a
// known dtype, a shape of non-negative integers (at most 8 dims, product < 2^62), offsets
// inside the data region, end - begin == product(shape) * element size, ranges not
// overlapping, names non-empty and unique (a duplicated JSON key is an error, not "last one
// wins"). Every error is prefixed "safetensors: <path>: " and names the tensor.
// After a successful open, tensor data pointers are valid for the file's lifetime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace strata {

// safetensors dtype strings. F8_E8M0 is the UE8M0 block-scale type of the DeepSeek / OCP MX
// checkpoints (value = 2^(byte - 127)).
enum class StDtype : uint8_t {
  f64,
  f32,
  f16,
  bf16,
  f8_e4m3,
  f8_e5m2,
  f8_e8m0,
  i64,
  i32,
  i16,
  i8,
  u64,
  u32,
  u16,
  u8,
  boolean,
};

const char* st_dtype_name(StDtype t);  // "BF16"
size_t st_dtype_size(StDtype t);       // bytes per element
bool st_dtype_parse(std::string_view s, StDtype* out);

struct StTensor {
  std::string name;
  StDtype dtype = StDtype::f32;
  std::vector<int64_t> shape;     // PyTorch order: shape[0] outermost ([out, in] for a linear)
  const uint8_t* data = nullptr;  // into the mapping
  size_t nbytes = 0;
  size_t offset = 0;  // absolute byte offset in the file

  int64_t numel() const;
  std::string shape_string() const;  // "BF16 [256, 128]"
};

class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // Parses an in-memory image (tests, fuzzing); `data` must outlive the object.
  static Result<std::unique_ptr<SafetensorsFile>> from_memory(const void* data, size_t size,
                                                              const std::string& label);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<StTensor>& tensors() const { return tensors_; }  // in header order
  const StTensor* find(std::string_view name) const;                 // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  size_t file_size() const { return size_; }
  // Drops the mapping's pages from this process (MADV_DONTNEED; they fault back in if read again):
  // for a loader that has copied what it needs. No-op for an in-memory image.
  void drop_resident_pages() const;
  // The same for the pages covering one of this file's tensors (no-op if t is not in the mapping).
  void drop_resident_pages(const StTensor& t) const;

 private:
  SafetensorsFile() = default;
  Status parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // non-null when we own an mmap
  std::vector<StTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace strata
