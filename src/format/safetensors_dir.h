// A checkpoint directory in the Hugging Face layout: *.safetensors shards, with
// model.safetensors.index.json ({"weight_map": {tensor: shard file}}) when there is one.
//
// SafetensorsDir::open validates the whole set before anything is used: every shard the index
// names exists and opens (SafetensorsFile's checks), every tensor the index lists is in the
// shard it names, and no tensor name appears in two shards. Without an index every
// *.safetensors file in the directory is a shard. Errors name the directory, the file and the
// tensor. Tensors stay views into the shards' mappings.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/safetensors.h"

namespace strata {

class SafetensorsDir {
 public:
  static constexpr const char* kIndexName = "model.safetensors.index.json";

  static Result<std::unique_ptr<SafetensorsDir>> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const StTensor* find(std::string_view name) const;  // nullptr if absent
  // The shard file (base name) holding `name`; "" if absent.
  std::string file_of(std::string_view name) const;
  // Drops the mapped pages of tensor `name` from this process (SafetensorsFile::drop_resident_pages).
  void drop_resident_pages(std::string_view name) const;
  size_t n_tensors() const { return where_.size(); }
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  bool has_index() const { return has_index_; }
  size_t total_bytes() const;  // sum of the shard files' sizes

 private:
  SafetensorsDir() = default;
  std::string dir_;
  bool has_index_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::vector<std::string> shard_names_;              // base names, parallel to shards_
  std::map<std::string, size_t, std::less<>> where_;  // tensor -> shard index
};

// Reads a whole small text file (config.json, engram_meta.json); errors name the path.
Result<std::string> read_text_file(const std::string& path, size_t max_bytes = 64u << 20);

}  // namespace strata
