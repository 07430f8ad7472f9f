#include "obs/membw.h"

#include <algorithm>
#include <immintrin.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "base/aligned.h"
#include "base/clock.h"
#include "base/cpu_features.h"

namespace strata {
namespace {

// Sum of 64-bit words (n a multiple of 8), 8 independent accumulators so the loop is bound by
// loads, not adds.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t a[8] = {};
  for (size_t i = 0; i < n / 8; ++i)
    for (int k = 0; k < 8; ++k) a[k] += p[8 * i + static_cast<size_t>(k)];
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
}

// The sum of a vector's 8 words (stored: GCC 12's _mm512_reduce_add_epi64 trips -Wuninitialized).
__attribute__((target("avx512f"))) uint64_t hsum512(__m512i v) {
  alignas(64) uint64_t out[8];
  _mm512_store_si512(out, v);
  uint64_t s = 0;
  for (uint64_t w : out) s += w;
  return s;
}

// One sequential stream over [p, p + n) (n a multiple of 32 words), 4 independent 64-byte loads
// per iteration.
__attribute__((target("avx512f"))) uint64_t sum_seq_avx512(const uint64_t* p, size_t n) {
  const __m512i* s = reinterpret_cast<const __m512i*>(p);
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 4 <= n / 8; i += 4) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(s + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(s + i + 1));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(s + i + 2));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(s + i + 3));
  }
  return hsum512(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}

__attribute__((target("avx2"))) uint64_t sum_seq_avx2(const uint64_t* p, size_t n) {
  const __m256i* s = reinterpret_cast<const __m256i*>(p);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 4 <= n / 4; i += 4) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(s + i));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(s + i + 1));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(s + i + 2));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(s + i + 3));
  }
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return out[0] + out[1] + out[2] + out[3];
}

// Four sequential streams over the quarters of [p, p + n) (n a multiple of 32 words), one 64-byte
// line per stream per iteration (two 32-byte loads with AVX2): a GEMV over a row group. kPf:
// each stream also prefetches the line kPrefetchAhead bytes ahead (past a quarter's end: the next
// quarter, past the block's end: the next block in memory, which may be another thread's).
constexpr size_t kPrefetchAhead = 1024;

template <bool kPf>
__attribute__((target("avx512f"))) uint64_t sum_streams_avx512(const uint64_t* p, size_t n) {
  const size_t q = n / 4;
  const __m512i* s[4] = {reinterpret_cast<const __m512i*>(p), reinterpret_cast<const __m512i*>(p + q),
                         reinterpret_cast<const __m512i*>(p + 2 * q),
                         reinterpret_cast<const __m512i*>(p + 3 * q)};
  __m512i a[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                  _mm512_setzero_si512()};
  for (size_t i = 0; i < q / 8; ++i) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      if (kPf) _mm_prefetch(reinterpret_cast<const char*>(s[k] + i) + kPrefetchAhead, _MM_HINT_T0);
      a[k] = _mm512_add_epi64(a[k], _mm512_load_si512(s[k] + i));
    }
  }
  return hsum512(_mm512_add_epi64(_mm512_add_epi64(a[0], a[1]), _mm512_add_epi64(a[2], a[3])));
}

template <bool kPf>
__attribute__((target("avx2"))) uint64_t sum_streams_avx2(const uint64_t* p, size_t n) {
  const size_t q = n / 4;
  const __m256i* s[4] = {reinterpret_cast<const __m256i*>(p), reinterpret_cast<const __m256i*>(p + q),
                         reinterpret_cast<const __m256i*>(p + 2 * q),
                         reinterpret_cast<const __m256i*>(p + 3 * q)};
  __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                  _mm256_setzero_si256()};
  for (size_t i = 0; i + 2 <= q / 4; i += 2) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      if (kPf) _mm_prefetch(reinterpret_cast<const char*>(s[k] + i) + kPrefetchAhead, _MM_HINT_T0);
      a[k] = _mm256_add_epi64(a[k],
                              _mm256_add_epi64(_mm256_load_si256(s[k] + i), _mm256_load_si256(s[k] + i + 1)));
    }
  }
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                     _mm256_add_epi64(_mm256_add_epi64(a[0], a[1]), _mm256_add_epi64(a[2], a[3])));
  return out[0] + out[1] + out[2] + out[3];
}

using SumFn = uint64_t (*)(const uint64_t*, size_t);

// The probe's patterns for this CPU (names as in membw.h).
std::vector<std::pair<const char*, SumFn>> patterns() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f)
    return {{"seq", sum_seq_avx512}, {"4x", sum_streams_avx512<false>}, {"4x+pf", sum_streams_avx512<true>}};
  if (f.avx2)
    return {{"seq", sum_seq_avx2}, {"4x", sum_streams_avx2<false>}, {"4x+pf", sum_streams_avx2<true>}};
  return {{"seq", sum_words}};
}

size_t read_size_file(const char* path) {
  std::FILE* f = std::fopen(path, "r");
  if (!f) return 0;
  unsigned long long v = 0;
  char unit = 0;
  const int got = std::fscanf(f, "%llu%c", &v, &unit);
  std::fclose(f);
  if (got < 1) return 0;
  if (unit == 'K') v <<= 10;
  if (unit == 'M') v <<= 20;
  return static_cast<size_t>(v);
}

}  // namespace

size_t last_level_cache_bytes() {
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    char path[96];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    best = std::max(best, read_size_file(path));
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (best == 0) {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) best = static_cast<size_t>(l3);
  }
#endif
  return best;
}

size_t membw_default_bytes() {
  return std::max<size_t>(size_t{256} << 20, 4 * last_level_cache_bytes());
}

MembwResult measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  MembwResult r;
  constexpr size_t kBlockWords = (256u << 10) / 8;  // 256 KiB per work item
  const size_t words = std::max<size_t>(bytes / 8 / kBlockWords, 1) * kBlockWords;
  const auto pats = patterns();
  r.patterns.resize(pats.size());
  {
    auto buf = aligned_alloc_array<uint64_t>(words);
    uint64_t* p = buf.get();
    // First touch from the pool, so pages land where the readers run.
    pool.parallel_for(static_cast<int64_t>(words),
                      [p](int64_t b, int64_t e) { std::memset(p + b, 1, static_cast<size_t>(e - b) * 8); });
    const int64_t n_blocks = static_cast<int64_t>(words / kBlockWords);
    std::atomic<uint64_t> sink{0};
    for (int rep = 0; rep < std::max(reps, 1); ++rep) {
      for (size_t k = 0; k < pats.size(); ++k) {
        const SumFn sum = pats[k].second;
        std::atomic<int64_t> next{0};
        const double t0 = now_seconds();
        pool.run([&](int, int) {
          uint64_t acc = 0;
          for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n_blocks;
               i = next.fetch_add(1, std::memory_order_relaxed))
            acc += sum(p + static_cast<size_t>(i) * kBlockWords, kBlockWords);
          sink.fetch_add(acc, std::memory_order_relaxed);
        });
        const double dt = now_seconds() - t0;
        MembwPattern& m = r.patterns[k];
        m.name = pats[k].first;
        if (dt > 0) m.bytes_per_s = std::max(m.bytes_per_s, double(words) * 8.0 / dt);
      }
    }
    for (const MembwPattern& m : r.patterns)
      if (m.bytes_per_s > r.bytes_per_s) r.bytes_per_s = m.bytes_per_s, r.pattern = m.name;
  }
  // The buffer is gone; forget the peak it made (Linux >= 4.0: "5" resets VmHWM to VmRSS).
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
  r.buffer_bytes = words * 8;
  r.threads = pool.size();
  return r;
}

}  // namespace strata
