// Split GGUF models (llama.cpp's gguf-split layout): joining the shards of a model on open, and
// writing a model as shards.
//
// Layout (llama.cpp de3ff81, examples/gguf-split): shard k of N is "PREFIX-%05d-of-%05d.gguf"
// (k counted from 1); every shard has split.no (u16, from 0), split.count (u16) and
// split.tensors.count (i32, the model's total); the first shard has all the other metadata.
// Each shard is a complete GGUF file of its own tensors.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "format/gguf.h"

namespace strata {
namespace {

constexpr const char* kSplitNo = "split.no";
constexpr const char* kSplitCount = "split.count";
constexpr const char* kSplitTensors = "split.tensors.count";

std::string split_suffix(int shard_no, int n_shards) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05d-of-%05d.gguf", shard_no + 1, n_shards);
  return buf;
}

}  // namespace

std::string gguf_split_path(const std::string& prefix, int shard_no, int n_shards) {
  return prefix + split_suffix(shard_no, n_shards);
}

Status GgufFile::join_shards() {
  if (!find(kSplitCount)) return {};
  STRATA_ASSIGN(const int64_t count, get_int(kSplitCount));
  STRATA_ASSIGN(const int64_t no, get_int_or(kSplitNo, 0));
  if (count < 1 || count > 99999)
    return err("gguf: %s: split.count = %" PRId64 " (expected 1..99999)", path_.c_str(), count);
  if (no < 0 || no >= count)
    return err("gguf: %s: split.no = %" PRId64 " is outside 0..%" PRId64, path_.c_str(), no, count - 1);
  if (count == 1) return {};
  const int n = static_cast<int>(count);
  const std::string suffix = split_suffix(static_cast<int>(no), n);
  if (path_.size() <= suffix.size() ||
      path_.compare(path_.size() - suffix.size(), suffix.size(), suffix) != 0)
    return err("gguf: %s: shard %" PRId64
               " of a %d-shard split model, but its name does not end in '%s': "
               "cannot find the other shards",
               path_.c_str(), no + 1, n, suffix.c_str());
  const std::string prefix = path_.substr(0, path_.size() - suffix.size());
  if (no != 0)
    return err("gguf: %s: shard %" PRId64 " of a %d-shard split model: open the first shard, %s",
               path_.c_str(), no + 1, n, gguf_split_path(prefix, 0, n).c_str());
  for (int i = 1; i < n; ++i) {
    const std::string sp = gguf_split_path(prefix, i, n);
    auto s = open_one(sp);
    if (!s.ok()) return err("gguf: %s: shard %d of %d: %s", path_.c_str(), i + 1, n, s.message().c_str());
    const GgufFile& sh = **s;
    auto s_count = sh.get_int(kSplitCount);
    auto s_no = sh.get_int(kSplitNo);
    if (!s_count.ok() || !s_no.ok())
      return err("gguf: %s: shard %d of %d: %s", path_.c_str(), i + 1, n,
                 (!s_count.ok() ? s_count : s_no).message().c_str());
    if (*s_count != count || *s_no != i)
      return err("gguf: %s: split.no = %" PRId64 ", split.count = %" PRId64
                 ", expected %d and %d (shard %d of %d)",
                 sp.c_str(), *s_no, *s_count, i, n, i + 1, n);
    for (const TensorView& t : sh.tensors()) {
      if (auto it = tensor_index_.find(t.name); it != tensor_index_.end())
        return err("gguf: %s: tensor '%s' is in two shards (also in %s)", sp.c_str(), t.name.c_str(),
                   path_.c_str());
      tensor_index_.emplace(t.name, tensors_.size());
      tensors_.push_back(t);
    }
    shards_.push_back(std::move(s).value());
  }
  if (find(kSplitTensors)) {
    STRATA_ASSIGN(const int64_t total, get_int(kSplitTensors));
    if (total != static_cast<int64_t>(tensors_.size()))
      return err("gguf: %s: split.tensors.count = %" PRId64 ", but the %d shards hold %zu tensors",
                 path_.c_str(), total, n, tensors_.size());
  }
  return {};
}

Result<std::vector<std::string>> gguf_write_split(const GgufFile& in, const std::string& prefix,
                                                  const GgufSplitOptions& opts) {
  const std::vector<TensorView>& ts = in.tensors();
  // Shard boundaries: [begin[k], begin[k + 1]).
  std::vector<size_t> begin = {0};
  uint64_t bytes = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const size_t in_shard = i - begin.back();
    const bool full_count = opts.max_tensors > 0 && in_shard >= static_cast<size_t>(opts.max_tensors);
    const bool full_bytes = opts.max_bytes > 0 && in_shard > 0 && bytes + ts[i].nbytes > opts.max_bytes;
    if (full_count || full_bytes) {
      begin.push_back(i);
      bytes = 0;
    }
    bytes += ts[i].nbytes;
  }
  const int n = static_cast<int>(begin.size());
  if (n > 99999) return err("gguf split: %d shards (at most 99999)", n);
  begin.push_back(ts.size());
  std::vector<std::string> paths;
  for (int k = 0; k < n; ++k) {
    GgufWriter w;
    if (const GgufValue* a = in.find("general.alignment")) w.set_value("general.alignment", *a);
    if (k == 0) {
      for (const GgufKv& kv : in.metadata()) {
        if (kv.key != kSplitNo && kv.key != kSplitCount && kv.key != kSplitTensors)
          w.set_value(kv.key, kv.value);
      }
    }
    w.set_value(kSplitNo, gguf_make_int(GgufValueType::u16, k));
    w.set_value(kSplitCount, gguf_make_int(GgufValueType::u16, n));
    w.set_value(kSplitTensors, gguf_make_int(GgufValueType::i32, static_cast<int64_t>(ts.size())));
    for (size_t i = begin[k]; i < begin[k + 1]; ++i) {
      const TensorView& t = ts[i];
      STRATA_TRY(w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data));
    }
    paths.push_back(gguf_split_path(prefix, k, n));
    STRATA_TRY(w.write(paths.back()));
  }
  return paths;
}

}  // namespace strata
