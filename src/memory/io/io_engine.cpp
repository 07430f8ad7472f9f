// memory/io_engine.h's names, plan prices and factory; the backends live in
// io_engine_{uring,threads,sync}.cpp.
#include "memory/io/io_engine.h"

#include <algorithm>

#include "base/assert.h"

namespace strata {

bool io_backend_from_name(const std::string& name, IoBackend* out) {
  if (name == "auto")
    *out = IoBackend::io_backend_auto;
  else if (name == "uring")
    *out = IoBackend::io_backend_uring;
  else if (name == "threads")
    *out = IoBackend::io_backend_threads;
  else if (name == "sync")
    *out = IoBackend::io_backend_sync;
  else
    return false;
  return true;
}

const char* io_backend_name(IoBackend b) {
  switch (b) {
    case IoBackend::io_backend_auto:
      return "auto";
    case IoBackend::io_backend_uring:
      return "uring";
    case IoBackend::io_backend_threads:
      return "threads";
    case IoBackend::io_backend_sync:
      return "sync";
  }
  return "?";
}

uint64_t io_engine_planned_bytes(IoBackend backend, int threads, int depth) {
  switch (backend) {
    case IoBackend::io_backend_uring:
      return io_uring_planned_bytes(depth);
    case IoBackend::io_backend_sync:
      return 0;
    case IoBackend::io_backend_auto:  // priced as what auto picks here
      return io_uring_usable() ? io_uring_planned_bytes(depth)
                               : static_cast<uint64_t>(std::max(threads, 0)) * kIoThreadStackBytes;
    case IoBackend::io_backend_threads:
      break;
  }
  return static_cast<uint64_t>(std::max(threads, 0)) * kIoThreadStackBytes;
}

namespace {
int split_count(const IoSegment* in, int n, uint64_t chunk) {
  int k = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t cover = io_align_up(in[i].off + in[i].len) - io_align_down(in[i].off);
    k += chunk == 0 || cover == 0 ? 1 : static_cast<int>((cover + chunk - 1) / chunk);
  }
  return k;
}
}  // namespace

int io_split_segments(const IoSegment* in, int n, size_t chunk, IoSegment* out, int max_out) {
  STRATA_ASSERT(n >= 0 && max_out >= n);
  uint64_t c = chunk ? io_align_up(chunk) : 0;
  while (c && split_count(in, n, c) > max_out) c *= 2;
  int k = 0;
  for (int i = 0; i < n; ++i) {
    const IoSegment& s = in[i];
    const uint64_t a0 = io_align_down(s.off), end = s.off + s.len;
    if (c == 0 || io_align_up(end) - a0 <= c) {
      out[k++] = s;
      continue;
    }
    for (uint64_t p = a0; p < end; p += c) {  // piece [max(p, off), min(p + c, end)) lands at dst + (p - a0)
      const uint64_t lo = std::max<uint64_t>(p, s.off), hi = std::min<uint64_t>(p + c, end);
      out[k++] = IoSegment{s.dst + (p - a0), lo, static_cast<size_t>(hi - lo), s.file};
    }
  }
  return k;
}

Status io_read_job(IoFile& f, const IoJob& job, uint64_t* bytes) {
  *bytes = 0;
  for (int s = 0; s < job.n; ++s) *bytes += job.seg[s].len;
  for (int s = 0; s < job.n; ++s)
    STRATA_TRY(io_read_covering(job.seg[s].file ? *job.seg[s].file : f, job.seg[s].dst, job.seg[s].off,
                                job.seg[s].len));
  return {};
}

Result<std::unique_ptr<IoEngine>> io_engine_make(IoBackend backend, IoFile& f, int threads, int depth,
                                                 IoEngine::Done done) {
  if (backend == IoBackend::io_backend_sync) return io_engine_make_sync(f, std::move(done));
  if (backend == IoBackend::io_backend_threads) return io_engine_make_threads(f, threads, std::move(done));
  auto u = io_engine_make_uring(f, depth, done);
  if (u.ok() || backend == IoBackend::io_backend_uring) return u;
  return io_engine_make_threads(f, threads, std::move(done));  // auto: fall back
}

}  // namespace strata
