// The threads backend of memory/io_engine.h: a pool of pread threads over a two-level queue.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "base/assert.h"
#include "base/clock.h"
#include "memory/io_engine.h"

namespace strata {

namespace {

class ThreadsEngine final : public IoEngine {
 public:
  ThreadsEngine(IoFile& f, int n_threads, Done done) : f_(f), done_(std::move(done)) {
    STRATA_ASSERT(n_threads >= 1);
    threads_.reserve(static_cast<size_t>(n_threads));
    for (int i = 0; i < n_threads; ++i) threads_.emplace_back([this] { worker(); });
  }
  ~ThreadsEngine() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      urgent_.clear();
      normal_.clear();
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  const char* name() const override { return "threads"; }
  int depth() const override { return static_cast<int>(threads_.size()); }
  uint64_t overhead_bytes() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return threads_.size() * kIoThreadStackBytes + (urgent_.size() + normal_.size()) * sizeof(IoJob);
  }

  void submit(const IoJob* jobs, size_t n, bool urgent) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (size_t i = 0; i < n; ++i) (urgent ? urgent_ : normal_).push_back(jobs[i]);
    }
    if (n == 1)
      cv_.notify_one();
    else if (n > 1)
      cv_.notify_all();
  }

  bool promote(uint32_t id) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = std::find_if(normal_.begin(), normal_.end(), [id](const IoJob& j) { return j.id == id; });
    if (it == normal_.end()) return false;
    const IoJob j = *it;
    normal_.erase(it);
    urgent_.push_front(j);
    return true;
  }

 private:
  void worker() {
    for (;;) {
      IoJob job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !urgent_.empty() || !normal_.empty(); });
        if (stop_) return;
        std::deque<IoJob>& q = urgent_.empty() ? normal_ : urgent_;
        job = q.front();
        q.pop_front();
      }
      const double t0 = now_seconds();
      Status st;
      uint64_t bytes = 0;
      for (int s = 0; s < job.n && st.ok(); ++s) {
        st = io_read_covering(f_, job.seg[s].dst, job.seg[s].off, job.seg[s].len);
        bytes += job.seg[s].len;
      }
      done_(job.id, st, bytes, now_seconds() - t0);
    }
  }

  IoFile& f_;
  Done done_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<IoJob> urgent_, normal_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

Result<std::unique_ptr<IoEngine>> io_engine_make_threads(IoFile& f, int threads, IoEngine::Done done) {
  if (threads < 1 || threads > 256) return err("io engine: %d threads must be in [1, 256]", threads);
  return std::unique_ptr<IoEngine>(new ThreadsEngine(f, threads, std::move(done)));
}

bool io_backend_from_name(const std::string& name, IoBackend* out) {
  if (name == "auto")
    *out = IoBackend::io_backend_auto;
  else if (name == "uring")
    *out = IoBackend::io_backend_uring;
  else if (name == "threads")
    *out = IoBackend::io_backend_threads;
  else
    return false;
  return true;
}

uint64_t io_engine_planned_bytes(IoBackend backend, int threads, int depth) {
  if (backend == IoBackend::io_backend_uring) return io_uring_planned_bytes(depth);
  return static_cast<uint64_t>(std::max(threads, 0)) * kIoThreadStackBytes;
}

Result<std::unique_ptr<IoEngine>> io_engine_make(IoBackend backend, IoFile& f, int threads, int depth,
                                                 IoEngine::Done done) {
  if (backend == IoBackend::io_backend_threads) return io_engine_make_threads(f, threads, std::move(done));
  auto u = io_engine_make_uring(f, depth, done);
  if (u.ok() || backend == IoBackend::io_backend_uring) return u;
  return io_engine_make_threads(f, threads, std::move(done));  // auto: fall back
}

}  // namespace strata
