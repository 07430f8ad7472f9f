// The machine's streaming read bandwidth: the roofline decode is measured against.
#pragma once

#include <cstddef>

#include "base/thread_pool.h"

namespace strata {

struct MembwResult {
  double bytes_per_s = 0;  // best repetition: every pool thread reads its share of the buffer
  size_t buffer_bytes = 0;
  int threads = 0;
};

// Streams a buffer of `bytes` (should be several times the last-level cache) with every thread
// of `pool` reading a contiguous share; the buffer is touched once first so no page faults are
// timed. Returns the best of `reps` passes (bandwidth is a capacity: the best run is closest).
MembwResult measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps);

}  // namespace strata
