// Checkpoint directory loader (see safetensors_dir.h).
#include "format/safetensors_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace strata {

namespace fs = std::filesystem;

Result<std::string> read_text_file(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return err("%s: file not found", path.c_str());
  const auto size = fs::file_size(path, ec);
  if (ec) return err("%s: cannot stat: %s", path.c_str(), ec.message().c_str());
  if (size > max_bytes)
    return err("%s: %llu bytes, more than the %zu-byte limit", path.c_str(),
               static_cast<unsigned long long>(size), max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) return err("%s: cannot open", path.c_str());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const StTensor* SafetensorsDir::find(std::string_view name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : shards_[it->second]->find(name);
}

std::string SafetensorsDir::file_of(std::string_view name) const {
  auto it = where_.find(name);
  return it == where_.end() ? std::string() : shard_names_[it->second];
}

void SafetensorsDir::drop_resident_pages(std::string_view name) const {
  auto it = where_.find(name);
  if (it == where_.end()) return;
  if (const StTensor* t = shards_[it->second]->find(name)) shards_[it->second]->drop_resident_pages(*t);
}

size_t SafetensorsDir::total_bytes() const {
  size_t n = 0;
  for (const auto& s : shards_) n += s->file_size();
  return n;
}

Result<std::unique_ptr<SafetensorsDir>> SafetensorsDir::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return err("checkpoint %s: not a directory", dir.c_str());
  std::unique_ptr<SafetensorsDir> d(new SafetensorsDir());
  d->dir_ = dir;
  const char* D = dir.c_str();
  const fs::path index_path = fs::path(dir) / kIndexName;
  std::map<std::string, std::string> weight_map;  // tensor -> shard (from the index)
  std::vector<std::string> files;
  if (fs::exists(index_path, ec)) {
    d->has_index_ = true;
    STRATA_ASSIGN(std::string text, read_text_file(index_path.string()));
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      return err("checkpoint %s: %s is not valid JSON: %s", D, kIndexName, e.what());
    }
    auto wm = j.is_object() ? j.find("weight_map") : j.end();
    if (!j.is_object() || wm == j.end() || !wm->is_object())
      return err("checkpoint %s: %s has no \"weight_map\" object", D, kIndexName);
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string())
        return err("checkpoint %s: %s: weight_map entry '%s' is not a file name", D, kIndexName,
                   it.key().c_str());
      const std::string f = it.value().get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        return err("checkpoint %s: %s: tensor '%s' maps to '%s', not a file name in the directory", D,
                   kIndexName, it.key().c_str(), f.c_str());
      weight_map[it.key()] = f;
      if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
    }
    for (const std::string& f : files) {
      if (!fs::is_regular_file(fs::path(dir) / f, ec)) {
        std::string example;
        for (const auto& [t, s] : weight_map)
          if (s == f) {
            example = t;
            break;
          }
        return err("checkpoint %s: shard '%s' is missing (the index maps tensor '%s' to it)", D, f.c_str(),
                   example.c_str());
      }
    }
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file() && e.path().extension() == ".safetensors")
        files.push_back(e.path().filename().string());
    }
    if (ec) return err("checkpoint %s: cannot list: %s", D, ec.message().c_str());
    std::sort(files.begin(), files.end());
    if (files.empty()) return err("checkpoint %s: no *.safetensors files (and no %s)", D, kIndexName);
  }
  for (const std::string& f : files) {
    auto sf = SafetensorsFile::open((fs::path(dir) / f).string());
    if (!sf.ok()) return err_context("checkpoint " + dir, sf.error());
    const size_t si = d->shards_.size();
    for (const StTensor& t : sf.value()->tensors()) {
      auto [it, fresh] = d->where_.emplace(t.name, si);
      if (!fresh)
        return err("checkpoint %s: tensor '%s' is in two shards: '%s' and '%s'", D, t.name.c_str(),
                   d->shard_names_[it->second].c_str(), f.c_str());
    }
    d->shards_.push_back(std::move(sf).value());
    d->shard_names_.push_back(f);
  }
  for (const auto& [t, f] : weight_map) {
    auto it = d->where_.find(t);
    if (it == d->where_.end())
      return err(
          "checkpoint %s: tensor '%s' is listed in %s under shard '%s' but that shard does not contain it", D,
          t.c_str(), kIndexName, f.c_str());
    if (d->shard_names_[it->second] != f)
      return err("checkpoint %s: tensor '%s': %s says shard '%s', found in '%s'", D, t.c_str(), kIndexName,
                 f.c_str(), d->shard_names_[it->second].c_str());
  }
  return d;
}

}  // namespace strata
