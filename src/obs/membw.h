// The machine's streaming read bandwidth: the roofline decode is measured against.
#pragma once

#include <cstddef>
#include <vector>

#include "base/thread_pool.h"

namespace strata {

// One read pattern's best pass.
struct MembwPattern {
  const char* name = "";
  double bytes_per_s = 0;
};

struct MembwResult {
  double bytes_per_s = 0;              // the best pass of any pattern: every pool thread reads its share
  const char* pattern = "";            // the pattern that gave it
  std::vector<MembwPattern> patterns;  // each pattern's best pass
  size_t buffer_bytes = 0;
  int threads = 0;
};

// The best read bandwidth of a buffer of `bytes` (several times the last-level cache, so it comes
// from DRAM), read the ways decode reads weights: threads take 256 KiB blocks from a shared
// counter and read each block as
//   seq      one sequential stream, the CPU's widest loads (64 bytes with AVX-512, 32 with AVX2);
//   4x       4 interleaved sequential streams over its quarters (a GEMV's row group);
//   4x+pf    the same, each stream prefetching (PREFETCHT0) 1 KiB ahead, as the decode kernels do.
// The buffer is touched once first so no page faults are timed. Each pattern gets `reps` passes,
// patterns interleaved pass by pass (a busy machine slows all alike); the result is the best pass
// (bandwidth is a capacity: the best run is closest), so a decode that reads its weights faster
// than the probe names a pattern the probe lacks. The buffer is freed and the process's peak-RSS
// mark reset afterwards (/proc/self/clear_refs), so the probe does not show up as the run's peak.
MembwResult measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps);

// The last-level cache's size (sysfs / sysconf; 0 when unknown) and the probe's default buffer:
// 4x that, at least 256 MiB.
size_t last_level_cache_bytes();
size_t membw_default_bytes();

}  // namespace strata
