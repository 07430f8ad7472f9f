// The threads backend of memory/io_engine.h: a pool of pread threads working off the two-level queue
// of memory/io_queue.h. The queue carries tickets into a table of the jobs handed in (a caller's
// job id may come back once its job is done, so the ticket, not the id, names a queue entry).
#include <algorithm>
#include <mutex>
#include <vector>

#include "base/assert.h"
#include "base/clock.h"
#include "memory/io/io_engine.h"
#include "memory/io/io_queue.h"

namespace strata {

namespace {

class ThreadsEngine final : public IoEngine {
 public:
  ThreadsEngine(IoFile& f, int n_threads, Done done)
      : f_(f), done_(std::move(done)), queue_(n_threads, [this](uint32_t t) { run(t); }) {}
  // queue_ goes first (declared last): it drops the queued tickets and joins the threads.

  const char* name() const override { return "threads"; }
  int depth() const override { return queue_.n_threads(); }
  uint64_t overhead_bytes() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return static_cast<uint64_t>(queue_.n_threads()) * kIoThreadStackBytes +
           (jobs_.size() - free_.size()) * sizeof(IoJob);
  }

  void submit(const IoJob* jobs, size_t n, bool urgent) override {
    for (size_t i = 0; i < n; ++i) {
      uint32_t t;
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (free_.empty()) {
          t = static_cast<uint32_t>(jobs_.size());
          jobs_.push_back(jobs[i]);
        } else {
          t = free_.back();
          free_.pop_back();
          jobs_[t] = jobs[i];
        }
      }
      queue_.submit(t, urgent);
    }
  }

  bool promote(uint32_t id) override {
    std::vector<uint32_t> tickets;
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (uint32_t t = 0; t < jobs_.size(); ++t)
        if (jobs_[t].n > 0 && jobs_[t].id == id) tickets.push_back(t);
    }
    bool moved = false;
    for (uint32_t t : tickets) moved = queue_.promote(t) || moved;
    return moved;
  }

 private:
  void run(uint32_t t) {
    IoJob job;
    {
      std::lock_guard<std::mutex> lk(mu_);
      job = jobs_[t];
    }
    const double t0 = now_seconds();
    uint64_t bytes = 0;
    const Status st = io_read_job(f_, job, &bytes);
    {
      std::lock_guard<std::mutex> lk(mu_);
      jobs_[t].n = 0;  // free: no id matches it
      free_.push_back(t);
    }
    done_(job.id, st, bytes, now_seconds() - t0);
  }

  IoFile& f_;
  Done done_;
  mutable std::mutex mu_;
  std::vector<IoJob> jobs_;     // by ticket; n == 0: free
  std::vector<uint32_t> free_;  // free tickets
  IoQueue queue_;               // last: its threads stop before the table goes
};

}  // namespace

Result<std::unique_ptr<IoEngine>> io_engine_make_threads(IoFile& f, int threads, IoEngine::Done done) {
  if (threads < 1 || threads > 256) return err("io engine: %d threads must be in [1, 256]", threads);
  return std::unique_ptr<IoEngine>(new ThreadsEngine(f, threads, std::move(done)));
}

}  // namespace strata
