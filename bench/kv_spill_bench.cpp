// The calling thread's time per spilled KV block (kv/kv_spill.h) on the way to the SSD tier: what
// the scheduler thread paid per block before the writes were asynchronous (the block file written
// on the calling thread: KvDiskTier::write, as KvSpill::to_disk did), and what it pays now
// (KvSpill::spill queues the record; the writer thread writes it). Bursts of 16 blocks of the
// bundled model's block size (96 KiB), the writer flushed between bursts (untimed), so the async
// case measures a queue with room; a sustained stream past the queue waits for the disk.
//   strata_bench_kv [--benchmark_filter=KvSpill] (files under $STRATA_BENCH_DIR, default ./)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kv/kv_spill.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

constexpr int kBlock = 16, kBurst = 16;
constexpr size_t kBytes = 96 * 1024;

struct Dir {
  fs::path p;
  explicit Dir(const char* name) {
    const char* base = std::getenv("STRATA_BENCH_DIR");
    p = fs::path(base ? base : ".") / (std::string(name) + "_" + std::to_string(::getpid()));
    fs::remove_all(p);
  }
  ~Dir() { fs::remove_all(p); }
};

KvBlockRecord block(uint64_t hash) {
  KvBlockRecord r;
  r.hash = hash;
  r.parent = hash - 1;
  for (int i = 0; i < kBlock; ++i) r.tokens.push_back(static_cast<int32_t>(hash * 31 + i));
  r.bytes.assign(kBytes, static_cast<uint8_t>(hash));
  return r;
}

const KvBlockFormat kFormat{1, 2, kBlock, kBytes, "k f16 v f16"};

// Before: the file written on the calling thread.
void BM_KvSpillSyncWrite(benchmark::State& state) {
  Dir d("kvspill_sync");
  auto t = KvDiskTier::open(d.p.string(), kFormat);
  if (!t.ok()) {
    state.SkipWithError(t.message().c_str());
    return;
  }
  uint64_t h = 1;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<KvBlockRecord> rs;
    for (int i = 0; i < kBurst; ++i) rs.push_back(block(h++));
    state.ResumeTiming();
    for (const KvBlockRecord& r : rs)
      if (!(*t)->write(r).ok()) state.SkipWithError("write failed");
  }
  state.SetItemsProcessed(state.iterations() * kBurst);
}

// After: queued for the writer thread.
void BM_KvSpillAsyncQueue(benchmark::State& state) {
  Dir d("kvspill_async");
  auto s = KvSpill::create({.dir = d.p.string()}, kFormat);
  if (!s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  uint64_t h = 1;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<KvBlockRecord> rs;
    for (int i = 0; i < kBurst; ++i) rs.push_back(block(h++));
    state.ResumeTiming();
    for (KvBlockRecord& r : rs) (*s)->spill(std::move(r));
    state.PauseTiming();
    if (!(*s)->flush().ok()) state.SkipWithError("write failed");
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kBurst);
}

// A fixed count of bursts: each writes 1.5 MiB of files (the async case untimed between bursts).
BENCHMARK(BM_KvSpillSyncWrite)->Unit(benchmark::kMicrosecond)->UseRealTime()->Iterations(64);
BENCHMARK(BM_KvSpillAsyncQueue)->Unit(benchmark::kMicrosecond)->UseRealTime()->Iterations(64);

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
