// One thread pool for the kernels (issue: -t THREADS, default all cores).
// parallel_for splits [0, n) into contiguous chunks, one per thread; the calling thread takes
// chunk 0, so a pool of 1 thread runs everything inline with no synchronisation.
//
// Every share of a run is *claimed* before it runs (one atomic exchange per share): a worker
// claims its own index when it wakes, and the calling thread, once done with share 0, claims
// and runs every share no worker has started yet. So a worker that the OS has descheduled
// (a busy machine, more threads than cores) delays nobody: the caller only ever waits for
// shares that are already running.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>  // callers pass std::function too
#include <memory>
#include <thread>
#include <vector>

#include "base/function_ref.h"

namespace strata {

// The spin-wait hint for busy loops: PAUSE on x86, YIELD on AArch64, nothing elsewhere.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class ThreadPool {
 public:
  // n_threads <= 0: std::thread::hardware_concurrency().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // fn(thread_idx, n_threads): every thread calls it once; returns when all are done.
  void run(FunctionRef<void(int, int)> fn);

  // fn(begin, end) over contiguous chunks of [0, n), at most one chunk per thread, chunk
  // boundaries rounded to multiples of `grain` (except the end).
  void parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> fn, int64_t grain = 1);

 private:
  void worker(int idx);

  int n_threads_;
  std::vector<std::thread> threads_;
  bool claim(int idx);

  const FunctionRef<void(int, int)>* job_ = nullptr;
  std::unique_ptr<std::atomic<uint8_t>[]> claimed_;  // [n_threads]: share i of the current run taken
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> done_{0};  // shares finished by workers in the current run
  std::atomic<bool> stop_{false};
};

}  // namespace strata
