// Work splitting over the ThreadPool, shared by every layer that computes (kernels' device ops,
// model's blocks): inline below a work threshold, items claimed from an atomic counter, and
// counters for dependencies between the items of one region.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/thread_pool.h"

namespace strata {

// Runs fn(begin, end) over [0, n): on the pool when `work` (≈ multiply-adds) is large enough to
// pay for waking the threads, else inline. Tiny models and single-token decode stay inline.
// A template so the lambda reaches the pool without a type-erased copy (no allocation per call).
constexpr int64_t kMinParallelWork = int64_t{1} << 18;
template <class Fn>
void parallel_rows(ThreadPool& pool, int64_t n, int64_t work, const Fn& fn) {
  if (pool.size() <= 1 || work < kMinParallelWork || n < 2) {
    fn(int64_t{0}, n);
    return;
  }
  pool.parallel_for(n, fn, 4);
}

// fn(item, thread) for every item in [0, n_items): with `parallel`, one pool region whose threads
// claim items from an atomic counter (a slow or preempted thread holds nobody up; one barrier),
// else inline on thread 0. `thread` indexes per-thread scratch.
template <class Fn>
void parallel_items(ThreadPool& pool, int64_t n_items, bool parallel, const Fn& fn) {
  if (!parallel || pool.size() <= 1 || n_items <= 1) {
    for (int64_t i = 0; i < n_items; ++i) fn(i, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.run([&](int ti, int) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n_items;
         i = next.fetch_add(1, std::memory_order_relaxed))
      fn(i, ti);
  });
}

// Dependencies between the items of one parallel_items region: an item counts itself done with
// count_done, a later item waits with wait_count until c >= target (acquire: what the counted
// items wrote is then visible). Items are claimed in order, so every item waited on is already
// done or running on another thread and the wait ends. It spins first, as long as the pool's
// region-end wait (an item takes microseconds; a sleeping thread would stall the other one
// again when it has to be woken), then sleeps on the counter, so a thread waiting for a
// descheduled one eventually gives up its core (a busy machine).
inline void count_done(std::atomic<int32_t>& c) {
  c.fetch_add(1, std::memory_order_release);
  c.notify_all();  // no system call unless a waiter sleeps
}
inline void wait_count(const std::atomic<int32_t>& c, int32_t target) {
  constexpr int kSpins = 200000;
  int32_t v = c.load(std::memory_order_acquire);
  for (int spin = 0; v < target && spin < kSpins; ++spin) {
    cpu_relax();
    v = c.load(std::memory_order_acquire);
  }
  while (v < target) {
    c.wait(v, std::memory_order_acquire);
    v = c.load(std::memory_order_acquire);
  }
}

}  // namespace strata
