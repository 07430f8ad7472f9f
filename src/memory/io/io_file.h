// The backing tier's raw reads: positional reads of one file, bypassing the OS page cache.
//
// The page cache is not a tier (design.md principle 1): expert bytes read from the backing file
// must not linger in RAM outside strata's budget. PosixIoFile opens with O_DIRECT; where the file
// system refuses it (tmpfs, some overlays) it falls back to buffered reads followed by
// posix_fadvise(DONTNEED) on the range, and says so (direct() == false).
//
// O_DIRECT rules (both modes follow them, so the fallback changes nothing for callers): file
// offsets, lengths and buffer addresses are multiples of kIoAlign. io_read_covering() handles the
// arithmetic: it reads the aligned range covering [off, off + len) into an aligned buffer.
//
// IoFile is an interface so tests can wrap a real file and inject short reads, EIO or a change
// of size (tests/memory/io_fault_test.cpp).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace strata {

inline constexpr size_t kIoAlign = 4096;

inline uint64_t io_align_down(uint64_t x) {
  return x & ~uint64_t{kIoAlign - 1};
}
inline uint64_t io_align_up(uint64_t x) {
  return (x + kIoAlign - 1) & ~uint64_t{kIoAlign - 1};
}

class IoFile {
 public:
  virtual ~IoFile() = default;
  virtual const std::string& path() const = 0;
  // True when reads bypass the page cache via O_DIRECT.
  virtual bool direct() const = 0;
  // The size the file had when opened (reads check the current size against it).
  virtual uint64_t opened_size() const = 0;
  // The file's size now (fstat), or an error naming the file.
  virtual Result<uint64_t> current_size() = 0;
  // One raw pread: bytes read (0 at end of file), or -errno. PRECOND: aligned as above.
  virtual int64_t pread(void* dst, size_t len, uint64_t off) = 0;
  // Drop [off, off + len) from the page cache (buffered fallback only; no-op for O_DIRECT).
  virtual void drop_cache(uint64_t off, size_t len) = 0;
  // The descriptor an asynchronous backend (io_uring) reads from; -1: reads must go through pread().
  virtual int fd() const { return -1; }
  // An asynchronous backend passes every raw result (bytes or -errno, as pread returns) of a read
  // of [off, off + len) into dst through here; fault-injection wrappers alter it.
  virtual int64_t on_async_result(void* dst, size_t len, uint64_t off, int64_t r) { return r; }
};

// Opens `path` read-only; direct = try O_DIRECT first (falls back as described above).
Result<std::unique_ptr<IoFile>> io_open_file(const std::string& path, bool direct);

// Reads the kIoAlign-aligned range covering [off, off + len) into dst (aligned, capacity at least
// io_align_up(off + len) - io_align_down(off) bytes); the wanted bytes then start at
// dst + (off - io_align_down(off)). Short reads are retried; EINTR/EAGAIN retried; other errors,
// an unexpected end of file and a file whose size changed since it was opened fail with a message
// naming the file and the offset. Never returns success with fewer than the wanted bytes.
Status io_read_covering(IoFile& f, void* dst, uint64_t off, size_t len);

// io_read_covering as steps, for backends that issue the raw reads themselves (io_uring):
//   IoCoverRead r; STRATA_TRY(r.start(f, dst, off, len));
//   while (!r.done()) { raw = read(r.next_dst(), r.next_len(), r.next_off()); STRATA_TRY(r.advance(f, raw));
//   }
// advance() takes pread's convention (bytes, 0 at end of file, -errno) and applies the same retry
// and error rules as io_read_covering.
class IoCoverRead {
 public:
  // Checks the file's size (unchanged since open, range inside it) and sets up the read.
  Status start(IoFile& f, void* dst, uint64_t off, size_t len);
  bool done() const { return got_ >= need_; }
  uint8_t* next_dst() const { return dst_ + got_; }
  size_t next_len() const { return static_cast<size_t>(a1_ - a0_ - got_); }
  uint64_t next_off() const { return a0_ + got_; }
  Status advance(IoFile& f, int64_t r);
  uint64_t covered_bytes() const { return a1_ - a0_; }

 private:
  uint8_t* dst_ = nullptr;
  uint64_t off_ = 0, a0_ = 0, a1_ = 0, need_ = 0, got_ = 0;
  int retries_ = 0;
};

}  // namespace strata
