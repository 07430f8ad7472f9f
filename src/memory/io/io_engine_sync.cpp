// The sync backend of memory/io_engine.h: the compute thread reads its own misses. submit() runs each
// job's segments one after another with blocking pread (io_read_covering: O_DIRECT, retries, errors
// naming file and offset) in the caller's thread and reports it through `done` before returning.
// One read in flight, no threads, no rings, no queue: the "naive" baseline the store is measured
// against (issue 6: LRU, no prefetch, synchronous reads).
#include "base/clock.h"
#include "memory/io/io_engine.h"

namespace strata {

namespace {

class SyncEngine final : public IoEngine {
 public:
  SyncEngine(IoFile& f, Done done) : f_(f), done_(std::move(done)) {}

  const char* name() const override { return "sync"; }
  int depth() const override { return 1; }
  uint64_t overhead_bytes() const override { return 0; }

  void submit(const IoJob* jobs, size_t n, bool /*urgent*/) override {
    for (size_t i = 0; i < n; ++i) {
      const IoJob& job = jobs[i];
      const double t0 = now_seconds();
      uint64_t bytes = 0;
      const Status st = io_read_job(f_, job, &bytes);
      done_(job.id, st, bytes, now_seconds() - t0);
    }
  }

  bool promote(uint32_t /*id*/) override { return false; }  // nothing is ever queued

 private:
  IoFile& f_;
  Done done_;
};

}  // namespace

std::unique_ptr<IoEngine> io_engine_make_sync(IoFile& f, IoEngine::Done done) {
  return std::unique_ptr<IoEngine>(new SyncEngine(f, std::move(done)));
}

}  // namespace strata
