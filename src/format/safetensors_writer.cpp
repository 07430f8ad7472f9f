#include "format/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

namespace strata {

size_t StTensorOut::nbytes() const {
  size_t n = st_dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

StTensorOut st_tensor_bytes(std::string name, StDtype dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  auto keep = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  StTensorOut t{std::move(name), dtype, std::move(shape), {}};
  t.fill = [keep](uint8_t* dst, size_t begin, size_t n) -> Status {
    if (begin + n > keep->size()) return err("%zu bytes given, %zu asked", keep->size(), begin + n);
    std::memcpy(dst, keep->data() + begin, n);
    return {};
  };
  return t;
}

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status pwrite_all(int fd, const uint8_t* p, size_t n, uint64_t off, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return err("safetensors: %s: write failed: %s", path.c_str(), std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return {};
}

// Flushes [off, off + n) to the disk and drops it from the page cache, so writing a file much
// larger than RAM neither fills memory with dirty pages nor evicts everyone else's.
void settle(int fd, uint64_t off, size_t n) {
#ifdef SYNC_FILE_RANGE_WRITE
  ::sync_file_range(fd, static_cast<off_t>(off), static_cast<off_t>(n),
                    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
#endif
  ::posix_fadvise(fd, static_cast<off_t>(off), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
}

}  // namespace

Result<uint64_t> write_safetensors(const std::string& path, std::span<const StTensorOut> tensors,
                                   const std::map<std::string, std::string>& metadata) {
  const char* P = path.c_str();
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t off = 0;
  for (const StTensorOut& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      return err("safetensors: %s: bad tensor name '%s'", P, t.name.c_str());
    if (!names.insert(t.name).second)
      return err("safetensors: %s: tensor '%s' appears twice", P, t.name.c_str());
    for (int64_t d : t.shape)
      if (d < 0) return err("safetensors: %s: tensor '%s' has a negative dimension", P, t.name.c_str());
    if (!t.fill) return err("safetensors: %s: tensor '%s' has no data", P, t.name.c_str());
    const uint64_t n = t.nbytes();
    h[t.name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string hs = h.dump();
  while ((8 + hs.size()) % 8) hs += ' ';  // the data region starts 8-byte aligned, as HF writes it
  Fd f;
  f.fd = ::open(P, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f.fd < 0) return err("safetensors: %s: cannot create: %s", P, std::strerror(errno));
  std::vector<uint8_t> head(8 + hs.size());
  const uint64_t hn = hs.size();
  std::memcpy(head.data(), &hn, 8);  // little-endian hosts only (x86-64)
  std::memcpy(head.data() + 8, hs.data(), hs.size());
  STRATA_TRY(pwrite_all(f.fd, head.data(), head.size(), 0, path));
  uint64_t pos = head.size();

  // Two chunk buffers: one is filled while the previous one is written.
  std::vector<uint8_t> buf[2];
  std::future<Status> pending;
  uint64_t settled = 0, pending_end = pos;
  int cur = 0;
  auto wait_pending = [&]() -> Status {
    if (!pending.valid()) return {};
    STRATA_TRY(pending.get());
    if (pending_end - settled >= (size_t{256} << 20)) {
      settle(f.fd, settled, static_cast<size_t>(pending_end - settled));
      settled = pending_end;
    }
    return {};
  };
  for (const StTensorOut& t : tensors) {
    const size_t total = t.nbytes();
    for (size_t b = 0; b < total; b += kStFillChunk) {
      const size_t n = std::min(kStFillChunk, total - b);
      std::vector<uint8_t>& bb = buf[cur];
      if (bb.size() < n) bb.resize(std::max(n, std::min(kStFillChunk, total)));
      if (Status st = t.fill(bb.data(), b, n); !st.ok()) {
        (void)wait_pending();
        return err("safetensors: %s: tensor '%s': %s", P, t.name.c_str(), st.message().c_str());
      }
      STRATA_TRY(wait_pending());
      const uint8_t* src = bb.data();
      const uint64_t at = pos;
      pending = std::async(std::launch::async,
                           [fd = f.fd, src, n, at, &path] { return pwrite_all(fd, src, n, at, path); });
      pos += n;
      pending_end = pos;
      cur ^= 1;
    }
  }
  STRATA_TRY(wait_pending());
  if (::fsync(f.fd) != 0) return err("safetensors: %s: fsync failed: %s", P, std::strerror(errno));
  settle(f.fd, 0, static_cast<size_t>(pos));
  return pos;
}

Result<StDirWritten> write_safetensors_dir(const std::string& dir, std::span<const StTensorOut> tensors,
                                           uint64_t shard_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return err("checkpoint %s: cannot create the directory: %s", dir.c_str(), ec.message().c_str());
  // Shards in order: a new one starts when the next tensor would take this one past shard_bytes.
  std::vector<std::pair<size_t, size_t>> shards;  // [first, last) tensor index
  uint64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t n = tensors[i].nbytes();
    if (shards.empty() || (in_shard > 0 && in_shard + n > shard_bytes)) {
      shards.push_back({i, i});
      in_shard = 0;
    }
    shards.back().second = i + 1;
    in_shard += n;
    total += n;
  }
  if (shards.empty()) return err("checkpoint %s: no tensors to write", dir.c_str());
  // A previous write's shards and index would be read with these (the reader takes every
  // *.safetensors of a directory without an index): removed first.
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const bool shard = n.size() == 32 && n.rfind("model-", 0) == 0 && n.find("-of-") == 11 &&
                       n.compare(n.size() - 12, 12, ".safetensors") == 0;
    if (shard || n == "model.safetensors" || n == "model.safetensors.index.json") fs::remove(e.path(), ec);
  }
  StDirWritten out;
  out.n_shards = static_cast<int>(shards.size());
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    if (shards.size() == 1)
      std::snprintf(name, sizeof name, "model.safetensors");
    else
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    const auto [a, b] = shards[s];
    STRATA_ASSIGN(const uint64_t bytes, write_safetensors((fs::path(dir) / name).string(),
                                                          tensors.subspan(a, b - a), {{"format", "pt"}}));
    out.bytes += bytes;
    for (size_t i = a; i < b; ++i) weight_map[tensors[i].name] = name;
  }
  if (shards.size() > 1) {
    const nlohmann::json idx = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    const std::string p = (fs::path(dir) / "model.safetensors.index.json").string();
    Fd f;
    f.fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f.fd < 0)
      return err("checkpoint %s: cannot create %s: %s", dir.c_str(), p.c_str(), std::strerror(errno));
    const std::string text = idx.dump(2) + "\n";
    STRATA_TRY(pwrite_all(f.fd, reinterpret_cast<const uint8_t*>(text.data()), text.size(), 0, p));
  }
  return out;
}

}  // namespace strata
