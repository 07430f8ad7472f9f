#include "obs/membw.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/aligned.h"
#include "base/clock.h"

namespace strata {
namespace {

// Sum of 64-bit words, 8 independent accumulators so the loop is bound by loads, not adds.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t a[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) a[k] += p[i + k];
  }
  for (; i < n; ++i) a[0] += p[i];
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
}

}  // namespace

MembwResult measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  MembwResult r;
  const size_t words = std::max<size_t>(bytes / 8, 64);
  auto buf = aligned_alloc_array<uint64_t>(words);
  uint64_t* p = buf.get();
  // First touch from the pool, so pages land where the readers run.
  pool.parallel_for(static_cast<int64_t>(words),
                    [p](int64_t b, int64_t e) { std::memset(p + b, 1, static_cast<size_t>(e - b) * 8); });
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int rep = 0; rep < std::max(reps, 1); ++rep) {
    const double t0 = now_seconds();
    pool.parallel_for(
        static_cast<int64_t>(words),
        [p, &sink](int64_t b, int64_t e) {
          sink.fetch_add(sum_words(p + b, static_cast<size_t>(e - b)), std::memory_order_relaxed);
        },
        512);
    const double dt = now_seconds() - t0;
    if (dt > 0) best = std::max(best, double(words) * 8.0 / dt);
  }
  r.bytes_per_s = best;
  r.buffer_bytes = words * 8;
  r.threads = pool.size();
  return r;
}

}  // namespace strata
