// Test helpers for the backing tier: temp files of random bytes, aligned buffers, and an IoFile
// wrapper that injects faults (short reads, errno failures, early end of file).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "memory/io/io_file.h"

namespace strata {

struct TempFile {
  std::string path;
  std::vector<uint8_t> bytes;
  TempFile(size_t n, uint32_t seed) {
    char tmpl[] = "/tmp/strata_io_XXXXXX";
    const int fd = ::mkstemp(tmpl);
    path = tmpl;
    bytes.resize(n);
    std::mt19937 rng(seed);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    if (fd >= 0) {
      if (::write(fd, bytes.data(), n) != static_cast<ssize_t>(n)) std::abort();
      ::close(fd);
    }
  }
  ~TempFile() { std::remove(path.c_str()); }
};

struct AlignedBuf {
  uint8_t* p;
  explicit AlignedBuf(size_t n) { p = static_cast<uint8_t*>(std::aligned_alloc(kIoAlign, io_align_up(n))); }
  ~AlignedBuf() { std::free(p); }
};

class FaultyFile final : public IoFile {
 public:
  explicit FaultyFile(std::unique_ptr<IoFile> inner) : in_(std::move(inner)) {}
  const std::string& path() const override { return in_->path(); }
  bool direct() const override { return in_->direct(); }
  uint64_t opened_size() const override { return in_->opened_size(); }
  Result<uint64_t> current_size() override { return in_->current_size(); }
  int64_t pread(void* dst, size_t len, uint64_t off) override {
    // Short reads must still be O_DIRECT-legal for the inner file: read aligned, copy a prefix.
    std::unique_ptr<uint8_t, decltype(&std::free)> tmp(
        static_cast<uint8_t*>(std::aligned_alloc(kIoAlign, io_align_up(len))), &std::free);
    const int64_t r = inject(len, off, in_->pread(tmp.get(), len, off));
    if (r > 0) std::memcpy(dst, tmp.get(), static_cast<size_t>(r));
    return r;
  }
  // io_uring reads the inner descriptor; the same faults are applied to its completions.
  int fd() const override { return in_->fd(); }
  int64_t on_async_result(void* dst, size_t len, uint64_t off, int64_t r) override {
    return inject(len, off, in_->on_async_result(dst, len, off, r));
  }
  void drop_cache(uint64_t off, size_t len) override { in_->drop_cache(off, len); }

  int short_reads = 0;  // 0 none, 1 random whole-page lengths, 2 one unaligned short read first
  int fail_errno = 0;   // fail reads at offsets >= fail_from with this errno
  uint64_t fail_from = 0;
  uint64_t eof_at = 0;  // reads at offsets >= eof_at return 0
  std::atomic<int> calls{0};

 private:
  // The fault for a raw read of [off, off + len) that returned r.
  int64_t inject(size_t len, uint64_t off, int64_t r) {
    const int call = ++calls;
    if (fail_errno && off >= fail_from) return -fail_errno;
    if (eof_at && off >= eof_at) return 0;
    if (r <= 0) return r;
    size_t n = static_cast<size_t>(r);
    // Short reads as O_DIRECT produces them: whole pages (mode 1); and one unaligned short read
    // (mode 2, first call only), which forces a re-read from the last page boundary.
    if (eof_at) n = std::min<size_t>(n, eof_at - off);
    std::lock_guard<std::mutex> lk(mu_);
    if (short_reads == 1 && len > kIoAlign)
      n = std::min<size_t>(n, kIoAlign * (1 + rng_() % std::max<size_t>(1, len / kIoAlign - 1)));
    if (short_reads == 2 && call == 1 && len > 1) n = std::min<size_t>(n, len / 2 + 1);
    return static_cast<int64_t>(n);
  }

  std::unique_ptr<IoFile> in_;
  std::mutex mu_;
  std::mt19937 rng_{5};
};

}  // namespace strata
