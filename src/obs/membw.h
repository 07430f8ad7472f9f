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

// Streams a buffer of `bytes` (several times the last-level cache) the way decode reads weights:
// threads take 256 KiB blocks from a shared counter and read each as 4 interleaved sequential
// streams (a GEMV's row group) with 32-byte loads where the CPU has AVX2; the buffer is touched
// once first so no page faults are timed. Returns the best of `reps` passes (bandwidth is a
// capacity: the best run is closest). The buffer is freed and the process's peak-RSS mark reset
// afterwards (/proc/self/clear_refs), so the probe does not show up as the run's peak.
MembwResult measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps);

// The last-level cache's size (sysfs / sysconf; 0 when unknown) and the probe's default buffer:
// 4x that, at least 256 MiB.
size_t last_level_cache_bytes();
size_t membw_default_bytes();

}  // namespace strata
