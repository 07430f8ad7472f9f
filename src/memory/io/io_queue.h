// A pool of I/O threads working off a two-level queue of read jobs (the backing tier's async
// reads): the one queue under both the expert store's threads backend (memory/io_engine_threads.cpp)
// and the Engram store (memory/engram_store.h). Urgent jobs (a compute thread is waiting: a demand
// miss) run before normal ones (prefetches); promote() moves a queued prefetch up when someone starts
// waiting for it.
//
// A job is an opaque id (the expert store uses slot indices); the handler given at construction
// does the work and its own completion signalling. Queue operations never allocate once the
// deques have grown to the working depth.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata {

class IoQueue {
 public:
  using Handler = std::function<void(uint32_t job)>;

  // n_threads >= 1 reader threads, each calling handler(job) for one job at a time.
  IoQueue(int n_threads, Handler handler);
  // Drops queued jobs that have not started and joins the threads (in-flight jobs finish).
  ~IoQueue();
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;

  void submit(uint32_t job, bool urgent);
  // If `job` is still queued as normal, move it to the urgent queue. Returns whether it did.
  bool promote(uint32_t job);
  // Removes every queued (not started) job and returns them, in no particular order.
  std::vector<uint32_t> drain();
  int n_threads() const { return static_cast<int>(threads_.size()); }
  size_t queued() const;

 private:
  void worker();

  Handler handler_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<uint32_t> urgent_;
  std::deque<uint32_t> normal_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace strata
