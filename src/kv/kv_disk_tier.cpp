#include "kv/kv_disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "base/aligned.h"
#include "memory/io/io_file.h"

namespace strata {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'K', 'V', 'B', 'L', 'K'};
constexpr size_t kHeader = 128;
constexpr size_t kTypesAt = 72, kTypesLen = 56;
constexpr int kPrinted = 8;  // log lines printed per directory scan (then a count)

uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

template <class T>
void put(uint8_t* p, size_t at, T v) {
  std::memcpy(p + at, &v, sizeof v);
}
template <class T>
T get(const uint8_t* p, size_t at) {
  T v;
  std::memcpy(&v, p + at, sizeof v);
  return v;
}

}  // namespace

// Four independent multiply-rotate lanes over 8-byte words (several GB/s), then the tail bytes
// and splitmix64's finalizer; detects corruption, not an adversary.
uint64_t kv_checksum(const uint8_t* p, size_t n) {
  constexpr uint64_t k1 = 0x9e3779b97f4a7c15ull, k2 = 0xc2b2ae3d27d4eb4full;
  uint64_t l[4] = {k1, k2, k1 ^ 0x5555, k2 ^ 0xaaaa};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; ++j) l[j] = rotl(l[j] ^ (get<uint64_t>(p, i + 8 * j) * k2), 31) * k1;
  uint64_t h = rotl(l[0], 1) + rotl(l[1], 7) + rotl(l[2], 12) + rotl(l[3], 18) + n;
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

uint64_t KvDiskTier::file_bytes(const KvBlockFormat& f) {
  return kHeader + static_cast<uint64_t>(f.block_size) * sizeof(int32_t) + f.payload_bytes;
}

void KvDiskTier::forget(uint64_t hash) {
  const auto it = files_.find(hash);
  if (it == files_.end()) return;
  lru_.erase(it->second);
  files_.erase(it);
}

int64_t KvDiskTier::add(uint64_t hash) {
  if (const auto it = files_.find(hash); it != files_.end()) {
    lru_.splice(lru_.end(), lru_, it->second);  // the most recently used
  } else {
    lru_.push_back(hash);
    files_.emplace(hash, std::prev(lru_.end()));
  }
  return evict();
}

int64_t KvDiskTier::evict() {
  int64_t n = 0;
  while (budget_ > 0 && !lru_.empty() && bytes() > budget_) {
    const uint64_t h = lru_.front();
    forget(h);
    if (::unlink(path_of(h).c_str()) != 0 && errno != ENOENT)
      note(path_of(h) + ": cannot delete it past --prefix-cache-dir-size: " + std::strerror(errno), false);
    ++n;
  }
  evicted_ += n;
  return n;
}

std::string KvDiskTier::path_of(uint64_t hash) const {
  char name[32];
  std::snprintf(name, sizeof name, "/%016llx.kvb", static_cast<unsigned long long>(hash));
  return dir_ + name;
}

void KvDiskTier::note(const std::string& m, bool scan) {
  if (!scan || ++n_notes_ <= kPrinted) std::fprintf(stderr, "strata: KV cache: %s\n", m.c_str());
  if (messages_.size() < 32) messages_.push_back(m);
}

std::string KvDiskTier::check_header(const uint8_t* h, uint64_t file_size, bool* ignore) const {
  *ignore = false;
  if (file_size < kHeader || std::memcmp(h, kMagic, sizeof kMagic) != 0)
    return "not a strata KV block file (bad magic or shorter than its header)";
  *ignore = true;
  const uint32_t version = get<uint32_t>(h, 8);
  if (version != kKvBlockLayout)
    return "KV block layout " + std::to_string(version) + ", this build reads " +
           std::to_string(kKvBlockLayout);
  char types[kTypesLen + 1] = {};
  std::memcpy(types, h + kTypesAt, kTypesLen);
  types[kTypesLen] = 0;
  if (get<uint64_t>(h, 16) != f_.model) return "made for another model (fingerprint differs)";
  if (get<uint64_t>(h, 24) != f_.salt || get<uint64_t>(h, 40) != f_.payload_bytes)
    return std::string("made for other KV types or widths (") + types + "; this engine holds " + f_.types +
           ")";
  if (get<uint32_t>(h, 32) != static_cast<uint32_t>(f_.block_size))
    return "made for blocks of " + std::to_string(get<uint32_t>(h, 32)) + " positions, this engine's hold " +
           std::to_string(f_.block_size);
  *ignore = false;
  if (get<uint32_t>(h, 12) != kHeader) return "bad header size";
  if (file_size != file_bytes())
    return "size " + std::to_string(file_size) + " bytes, a block file is " + std::to_string(file_bytes()) +
           " (truncated or corrupted)";
  return "";
}

Result<std::unique_ptr<KvDiskTier>> KvDiskTier::open(const std::string& dir, const KvBlockFormat& f,
                                                     uint64_t budget) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec))
    return err("--prefix-cache-dir %s: not a directory and cannot be created (%s)", dir.c_str(),
               ec ? ec.message().c_str() : "exists as a file");
  std::unique_ptr<KvDiskTier> t(new KvDiskTier(dir, f, budget));
  std::vector<std::pair<fs::file_time_type, uint64_t>> found;  // sorted by age: the LRU order
  t->f_.types.resize(std::min<size_t>(t->f_.types.size(), kTypesLen - 1));
  auto buf = aligned_alloc_array<uint8_t>(kIoAlign, kIoAlign);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".kvb" || !it->is_regular_file(ec)) continue;
    const std::string name = p.stem().string();
    char* stop = nullptr;
    const uint64_t hash = std::strtoull(name.c_str(), &stop, 16);
    auto file = io_open_file(p.string(), true);
    Status st = file.ok() ? Status{} : Status(file.error());
    if (st.ok()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>((*file)->opened_size(), kHeader));
      st = n == 0 ? Status{} : io_read_covering(**file, buf.get(), 0, n);
    }
    if (!st.ok()) {
      ++t->rejected_;
      t->note(st.message() + " (skipped)");
      continue;
    }
    bool ignore = false;
    std::string why = t->check_header(buf.get(), (*file)->opened_size(), &ignore);
    if (why.empty() && (name.size() != 16 || *stop != 0 || get<uint64_t>(buf.get(), 48) != hash))
      why = "its name is not its block's hash";
    if (!why.empty()) {
      ++(ignore ? t->ignored_ : t->rejected_);
      t->note(p.string() + ": " + why + (ignore ? "; ignored" : "; skipped"));
      continue;
    }
    std::error_code tec;
    found.emplace_back(fs::last_write_time(p, tec), hash);
  }
  if (ec) return err("--prefix-cache-dir %s: cannot list it: %s", dir.c_str(), ec.message().c_str());
  std::sort(found.begin(), found.end());
  for (const auto& [when, hash] : found) {
    t->lru_.push_back(hash);
    t->files_.emplace(hash, std::prev(t->lru_.end()));
  }
  if (const int64_t n = t->evict(); n > 0)
    std::fprintf(stderr,
                 "strata: KV cache: %s: %lld least recently used block files deleted (over %s bytes)\n",
                 dir.c_str(), static_cast<long long>(n), std::to_string(budget).c_str());
  if (t->n_notes_ > kPrinted)
    std::fprintf(
        stderr, "strata: KV cache: %s: %lld files ignored, %lld skipped (the first %d named above)\n",
        dir.c_str(), static_cast<long long>(t->ignored_), static_cast<long long>(t->rejected_), kPrinted);
  return t;
}

Status KvDiskTier::write(const KvBlockRecord& r) {
  if (contains(r.hash)) return {};
  STRATA_TRY(write_file(r));
  add(r.hash);
  return {};
}

Status KvDiskTier::write_file(const KvBlockRecord& r) const {
  if (r.tokens.size() != static_cast<size_t>(f_.block_size) || r.bytes.size() != f_.payload_bytes)
    return err("KV block %016llx: %zu tokens and %zu bytes, the block files hold %d and %llu",
               static_cast<unsigned long long>(r.hash), r.tokens.size(), r.bytes.size(), f_.block_size,
               static_cast<unsigned long long>(f_.payload_bytes));
  std::vector<uint8_t> b(file_bytes(), 0);
  std::memcpy(b.data(), kMagic, sizeof kMagic);
  put<uint32_t>(b.data(), 8, kKvBlockLayout);
  put<uint32_t>(b.data(), 12, static_cast<uint32_t>(kHeader));
  put<uint64_t>(b.data(), 16, f_.model);
  put<uint64_t>(b.data(), 24, f_.salt);
  put<uint32_t>(b.data(), 32, static_cast<uint32_t>(f_.block_size));
  put<uint64_t>(b.data(), 40, f_.payload_bytes);
  put<uint64_t>(b.data(), 48, r.hash);
  put<uint64_t>(b.data(), 56, r.parent);
  std::memcpy(b.data() + kTypesAt, f_.types.data(), f_.types.size());
  std::memcpy(b.data() + kHeader, r.tokens.data(), r.tokens.size() * sizeof(int32_t));
  std::memcpy(b.data() + kHeader + r.tokens.size() * sizeof(int32_t), r.bytes.data(), r.bytes.size());
  put<uint64_t>(b.data(), 64, kv_checksum(b.data(), b.size()));
  const std::string path = path_of(r.hash), tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return err("%s: cannot create: %s", tmp.c_str(), std::strerror(errno));
  size_t done = 0;
  while (done < b.size()) {
    const ssize_t w = ::write(fd, b.data() + done, b.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = w < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(tmp.c_str());
      return err("%s: write failed: %s", tmp.c_str(), std::strerror(e));
    }
    done += static_cast<size_t>(w);
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // the page cache is not a tier
  if (::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return err("%s: cannot write: %s", path.c_str(), std::strerror(e));
  }
  return {};
}

Result<KvBlockRecord> KvDiskTier::read(uint64_t hash) {
  const std::string path = path_of(hash);
  auto fail = [&](const std::string& why) -> Result<KvBlockRecord> {
    forget(hash);
    ++rejected_;
    note(path + ": " + why + "; recomputed", false);
    return err("%s: %s", path.c_str(), why.c_str());
  };
  if (!contains(hash)) return err("%s: no such KV block file", path.c_str());
  auto file = io_open_file(path, true);
  if (!file.ok()) return fail(file.message());
  const uint64_t size = (*file)->opened_size();
  bool ignore = false;
  if (size != file_bytes())
    return fail("size " + std::to_string(size) + " bytes, a block file is " + std::to_string(file_bytes()) +
                " (truncated or corrupted)");
  auto buf = aligned_alloc_array<uint8_t>(static_cast<size_t>(io_align_up(size)), kIoAlign);
  if (Status st = io_read_covering(**file, buf.get(), 0, static_cast<size_t>(size)); !st.ok())
    return fail(st.message());
  if (std::string why = check_header(buf.get(), size, &ignore); !why.empty()) return fail(why);
  if (get<uint64_t>(buf.get(), 48) != hash) return fail("holds another block's hash");
  const uint64_t sum = get<uint64_t>(buf.get(), 64);
  put<uint64_t>(buf.get(), 64, 0);
  if (kv_checksum(buf.get(), static_cast<size_t>(size)) != sum)
    return fail("checksum mismatch (a corrupted KV block file)");
  KvBlockRecord r;
  r.hash = hash;
  r.parent = get<uint64_t>(buf.get(), 56);
  r.tokens.resize(static_cast<size_t>(f_.block_size));
  std::memcpy(r.tokens.data(), buf.get() + kHeader, r.tokens.size() * sizeof(int32_t));
  const uint8_t* pay = buf.get() + kHeader + r.tokens.size() * sizeof(int32_t);
  r.bytes.assign(pay, pay + f_.payload_bytes);
  add(hash);                                        // the most recently used
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // and so after a restart
  return r;
}

}  // namespace strata
