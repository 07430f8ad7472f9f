// memory/io_engine.h's names, plan prices and factory; the backends live in
// io_engine_{uring,threads,sync}.cpp.
#include "memory/io_engine.h"

#include <algorithm>

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

Status io_read_job(IoFile& f, const IoJob& job, uint64_t* bytes) {
  *bytes = 0;
  for (int s = 0; s < job.n; ++s) *bytes += job.seg[s].len;
  for (int s = 0; s < job.n; ++s)
    STRATA_TRY(io_read_covering(f, job.seg[s].dst, job.seg[s].off, job.seg[s].len));
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
