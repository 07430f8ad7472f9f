#include "base/thread_pool.h"

#include <algorithm>

#include "base/assert.h"

namespace strata {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  claimed_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(n_threads_));
  for (int i = 0; i < n_threads_; ++i) claimed_[static_cast<size_t>(i)].store(1, std::memory_order_relaxed);
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
}

// Share idx of the current run: true for exactly one caller per run. The acquire half pairs with
// run()'s release reset, so a successful claim also sees that run's job_.
bool ThreadPool::claim(int idx) {
  return claimed_[static_cast<size_t>(idx)].exchange(1, std::memory_order_acq_rel) == 0;
}

void ThreadPool::worker(int idx) {
  uint32_t seen = 0;
  for (;;) {
    // Spin briefly (steps come back to back during a forward pass), then sleep.
    uint32_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < 20000; ++spin) {
      cpu_relax();
      g = generation_.load(std::memory_order_acquire);
    }
    while (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    // The caller may already have run this share (we were late): then there is nothing to do.
    if (!claim(idx)) continue;
    (*job_)(idx, n_threads_);
    done_.fetch_add(1, std::memory_order_acq_rel);
    done_.notify_one();
  }
}

void ThreadPool::run(FunctionRef<void(int, int)> fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  // Every share of the previous run was claimed and finished before it returned, so nobody
  // touches job_ / done_ / claimed_ now.
  job_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  for (int i = 1; i < n_threads_; ++i) claimed_[static_cast<size_t>(i)].store(0, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0, n_threads_);
  int by_workers = 0;  // shares the workers claimed: wait for exactly those
  for (int i = 1; i < n_threads_; ++i) {
    if (claim(i)) {
      fn(i, n_threads_);
    } else {
      ++by_workers;
    }
  }
  int d = done_.load(std::memory_order_acquire);
  for (int spin = 0; d != by_workers && spin < 200000; ++spin) {
    cpu_relax();
    d = done_.load(std::memory_order_acquire);
  }
  while (d != by_workers) {
    done_.wait(d, std::memory_order_acquire);
    d = done_.load(std::memory_order_acquire);
  }
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> fn, int64_t grain) {
  if (n <= 0) return;
  STRATA_ASSERT(grain >= 1);
  const int64_t units = (n + grain - 1) / grain;
  const int nt = static_cast<int>(std::min<int64_t>(n_threads_, units));
  if (nt <= 1) {
    fn(0, n);
    return;
  }
  auto chunk = [&](int t, int) {
    if (t >= nt) return;
    const int64_t b = std::min(n, (units * t / nt) * grain);
    const int64_t e = std::min(n, (units * (t + 1) / nt) * grain);
    if (b < e) fn(b, e);
  };
  run(chunk);
}

}  // namespace strata
