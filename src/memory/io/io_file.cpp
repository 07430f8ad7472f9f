#include "memory/io/io_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace strata {

namespace {

class PosixIoFile final : public IoFile {
 public:
  PosixIoFile(std::string path, int fd, bool direct, uint64_t size)
      : path_(std::move(path)), fd_(fd), direct_(direct), size_(size) {}
  ~PosixIoFile() override { ::close(fd_); }

  const std::string& path() const override { return path_; }
  bool direct() const override { return direct_; }
  uint64_t opened_size() const override { return size_; }

  Result<uint64_t> current_size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return err("%s: fstat failed: %s", path_.c_str(), std::strerror(errno));
    return static_cast<uint64_t>(st.st_size);
  }

  int64_t pread(void* dst, size_t len, uint64_t off) override {
    const ssize_t r = ::pread(fd_, dst, len, static_cast<off_t>(off));
    return r < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(r);
  }

  void drop_cache(uint64_t off, size_t len) override {
    if (!direct_) ::posix_fadvise(fd_, static_cast<off_t>(off), static_cast<off_t>(len), POSIX_FADV_DONTNEED);
  }
  int fd() const override { return fd_; }

 private:
  std::string path_;
  int fd_;
  bool direct_;
  uint64_t size_;
};

}  // namespace

Result<std::unique_ptr<IoFile>> io_open_file(const std::string& path, bool direct) {
  int fd = -1;
  bool is_direct = false;
  if (direct) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    is_direct = fd >= 0;
    if (fd < 0 && errno != EINVAL) return err("%s: cannot open: %s", path.c_str(), std::strerror(errno));
  }
  if (fd < 0) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err("%s: cannot open: %s", path.c_str(), std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return err("%s: fstat failed: %s", path.c_str(), std::strerror(e));
  }
  return std::unique_ptr<IoFile>(new PosixIoFile(path, fd, is_direct, static_cast<uint64_t>(st.st_size)));
}

Status IoCoverRead::start(IoFile& f, void* dst, uint64_t off, size_t len) {
  dst_ = static_cast<uint8_t*>(dst);
  off_ = off;
  a0_ = io_align_down(off);
  a1_ = io_align_up(off + len);
  need_ = off + len - a0_;  // bytes from a0 that must arrive
  got_ = 0;
  retries_ = 0;
  // The file changing under us (truncated, replaced by a rewrite) must never yield wrong weights.
  STRATA_ASSIGN(const uint64_t now, f.current_size());
  if (now != f.opened_size())
    return err("%s: backing file changed size (was %llu bytes, now %llu) while reading offset %llu",
               f.path().c_str(), static_cast<unsigned long long>(f.opened_size()),
               static_cast<unsigned long long>(now), static_cast<unsigned long long>(off));
  if (off + len > f.opened_size())
    return err("%s: read of %zu bytes at offset %llu is past the end of the file (%llu bytes)",
               f.path().c_str(), len, static_cast<unsigned long long>(off),
               static_cast<unsigned long long>(f.opened_size()));
  return {};
}

Status IoCoverRead::advance(IoFile& f, int64_t r) {
  if (r == -EINTR || r == -EAGAIN) return {};
  if (r < 0)
    return err("%s: read error at offset %llu (%llu bytes): %s", f.path().c_str(),
               static_cast<unsigned long long>(a0_ + got_), static_cast<unsigned long long>(a1_ - a0_ - got_),
               std::strerror(static_cast<int>(-r)));
  if (r == 0)
    return err("%s: unexpected end of file at offset %llu (wanted %llu more bytes; file changed?)",
               f.path().c_str(), static_cast<unsigned long long>(a0_ + got_),
               static_cast<unsigned long long>(need_ - got_));
  got_ += static_cast<uint64_t>(r);
  // A short read that is not page-aligned cannot continue under O_DIRECT (unaligned offset):
  // re-read from the last aligned boundary, which overwrites the same bytes with the same bytes.
  if (got_ < need_ && (got_ % kIoAlign) != 0) {
    if (++retries_ > 64)
      return err("%s: too many short reads at offset %llu", f.path().c_str(),
                 static_cast<unsigned long long>(a0_ + got_));
    got_ = io_align_down(got_);
  }
  if (done()) f.drop_cache(a0_, static_cast<size_t>(a1_ - a0_));
  return {};
}

Status io_read_covering(IoFile& f, void* dst, uint64_t off, size_t len) {
  IoCoverRead rd;
  STRATA_TRY(rd.start(f, dst, off, len));
  // Ask for whole aligned pages; at the end of the file the kernel returns the short tail.
  while (!rd.done()) STRATA_TRY(rd.advance(f, f.pread(rd.next_dst(), rd.next_len(), rd.next_off())));
  return {};
}

}  // namespace strata
