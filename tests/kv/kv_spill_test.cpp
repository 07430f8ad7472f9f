// The spill tiers of the KV cache on their own (kv/kv_ram_tier.h, kv/kv_disk_tier.h): the RAM
// tier's LRU under its byte budget, block files round-tripped, and files of another model, KV
// types or layout ignored, garbage, truncated and corrupted files rejected with messages that
// name them (never a crash, never a wrong block); the SSD tier's byte budget (least recently used
// files deleted, across a reopening too); the asynchronous SSD writes (kv/kv_spill.h): blocks
// whose write is pending are found and served from their queued copy, a full queue makes the
// spill wait, and after the flush every block's file reads back bit for bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "kv/kv_disk_tier.h"
#include "kv/kv_ram_tier.h"
#include "kv/kv_spill.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

KvBlockRecord record(uint64_t hash, int bs, size_t bytes, int seed) {
  KvBlockRecord r;
  r.hash = hash;
  r.parent = hash * 3;
  for (int i = 0; i < bs; ++i) r.tokens.push_back(seed * 100 + i);
  for (size_t i = 0; i < bytes; ++i)
    r.bytes.push_back(static_cast<uint8_t>(i * 7 + static_cast<size_t>(seed)));
  return r;
}

struct TempDir {
  fs::path p = fs::temp_directory_path() / ("strata_kvspill_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(p); }
  ~TempDir() { fs::remove_all(p); }
};

bool any_has(const std::vector<std::string>& ms, const std::string& a, const std::string& b) {
  for (const auto& m : ms)
    if (m.find(a) != std::string::npos && m.find(b) != std::string::npos) return true;
  return false;
}

TEST(KvRamTier, KeepsTheMostRecentUnderItsBudget) {
  const KvBlockRecord a = record(1, 4, 100, 1);
  KvRamTier t(2 * a.footprint());
  EXPECT_TRUE(t.put(record(1, 4, 100, 1)).empty());
  EXPECT_TRUE(t.put(record(2, 4, 100, 2)).empty());
  const auto out = t.put(record(3, 4, 100, 3));  // pushes the least recently used out
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].hash, 1u);
  EXPECT_EQ(t.blocks(), 2);
  EXPECT_EQ(t.bytes(), 2 * a.footprint());
  const KvBlockRecord b = record(2, 4, 100, 2);
  EXPECT_FALSE(t.take(2, 999, b.tokens));  // another parent: a collision, not this block
  auto got = t.take(2, b.parent, b.tokens);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bytes, b.bytes);
  EXPECT_FALSE(t.contains(2));
  EXPECT_EQ(t.bytes(), a.footprint());
  KvRamTier tiny(10);  // a block larger than the budget goes straight through
  EXPECT_EQ(tiny.put(record(5, 4, 100, 5)).size(), 1u);
  EXPECT_EQ(tiny.blocks(), 0);
}

TEST(KvDiskTier, BlocksRoundTripAndSurviveReopening) {
  TempDir d;
  const KvBlockFormat f{11, 22, 4, 300, "k f16 v f16"};
  {
    auto t = KvDiskTier::open(d.p.string(), f);
    ASSERT_TRUE(t.ok()) << t.message();
    ASSERT_TRUE((*t)->write(record(0xabc, 4, 300, 1)).ok());
    ASSERT_TRUE((*t)->write(record(0xdef, 4, 300, 2)).ok());
    EXPECT_FALSE((*t)->write(record(0x123, 4, 299, 3)).ok());  // not this format's size
  }
  auto t = KvDiskTier::open(d.p.string(), f);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ((*t)->blocks(), 2);
  EXPECT_TRUE((*t)->messages().empty());
  auto r = (*t)->read(0xdef);
  ASSERT_TRUE(r.ok()) << r.message();
  const KvBlockRecord want = record(0xdef, 4, 300, 2);
  EXPECT_TRUE(r->names(want.hash, want.parent, want.tokens));
  EXPECT_EQ(r->bytes, want.bytes);
}

TEST(KvDiskTier, FilesOfAnotherModelOrTypesAreIgnoredBadOnesRejected) {
  TempDir d;
  const KvBlockFormat f{11, 22, 4, 300, "k f16 v f16"};
  {
    auto t = KvDiskTier::open(d.p.string(), f);
    ASSERT_TRUE(t.ok());
    for (uint64_t h = 1; h <= 3; ++h) ASSERT_TRUE((*t)->write(record(h, 4, 300, static_cast<int>(h))).ok());
  }
  KvBlockFormat other_model = f, other_types = f;
  other_model.model = 12;
  other_types.salt = 23;
  for (const KvBlockFormat& g : {other_model, other_types}) {
    auto t = KvDiskTier::open(d.p.string(), g);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ((*t)->blocks(), 0);
    EXPECT_EQ((*t)->ignored(), 3);
    EXPECT_TRUE(
        any_has((*t)->messages(), d.p.string(), g.model != f.model ? "another model" : "other KV types"));
  }
  std::ofstream(d.p / "00000000000000ff.kvb") << "hello";  // garbage
  fs::copy_file(d.p / "0000000000000001.kvb", d.p / "0000000000000009.kvb");
  fs::resize_file(d.p / "0000000000000009.kvb", 200);  // truncated
  {                                                    // flips the last payload byte of block 2
    std::fstream io(d.p / "0000000000000002.kvb", std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(-1, std::ios::end);
    const char c = static_cast<char>(io.get() ^ 0x10);
    io.seekp(-1, std::ios::end);
    io.put(c);
  }
  auto t = KvDiskTier::open(d.p.string(), f);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->blocks(), 3);  // 1, 2 (corrupted: found on read) and 3
  EXPECT_EQ((*t)->rejected(), 2);
  EXPECT_TRUE(any_has((*t)->messages(), "00000000000000ff.kvb", "not a strata KV block file"));
  EXPECT_TRUE(any_has((*t)->messages(), "0000000000000009.kvb", "truncated"));
  auto bad = (*t)->read(2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("0000000000000002.kvb"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("checksum"), std::string::npos) << bad.message();
  EXPECT_FALSE((*t)->contains(2));
  EXPECT_TRUE((*t)->read(3).ok());
}

TEST(KvSpill, RamPushesOutToSsdAndTheCostModelWeighsBoth) {
  TempDir d;
  const KvBlockFormat f{1, 2, 4, 300, "k f32 v f32"};
  const uint64_t fp = record(1, 4, 300, 1).footprint();
  auto s = KvSpill::create({.ram_bytes = 2 * fp, .dir = d.p.string()}, f);
  ASSERT_TRUE(s.ok()) << s.message();
  for (uint64_t h = 1; h <= 3; ++h) (*s)->spill(record(h, 4, 300, static_cast<int>(h)));
  EXPECT_EQ((*s)->where(1), KvTier::disk);
  EXPECT_EQ((*s)->where(3), KvTier::ram);
  const KvBlockRecord one = record(1, 4, 300, 1);
  auto got = (*s)->fetch(1, one.parent, one.tokens);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bytes, one.bytes);
  ASSERT_TRUE((*s)->flush().ok());  // counted as spilled to SSD once written
  const KvSpillStats st = (*s)->stats();
  EXPECT_EQ(st.disk_hits, 1u);
  EXPECT_EQ(st.spilled_ram_bytes, 900u);
  EXPECT_EQ(st.spilled_disk_bytes, 300u);
  // Nothing measured: loading is predicted cheaper. Then 1 µs / token against 1 MB/s.
  EXPECT_TRUE((*s)->load_cheaper(1, 0, 16, 1 << 20));
  (*s)->observe_prefill(1000, 1e-3);
  (*s)->observe_load(KvTier::ram, 1 << 20, 1.0);
  EXPECT_FALSE((*s)->load_cheaper(1, 0, 16, 1 << 20));
  EXPECT_TRUE((*s)->load_cheaper(1, 0, 16, 8));
  (*s)->set_last_measured(1e-6, 1);  // under the 16 µs recompute predicted
  (*s)->load_cheaper(1, 0, 16, 8);
  (*s)->set_last_measured(1e-3, 1);  // over it
  const KvSpillStats c = (*s)->stats();
  EXPECT_EQ(c.load_decisions, 3u);
  EXPECT_EQ(c.recompute_decisions, 1u);
  EXPECT_EQ(c.loads_beat_recompute, 1u);
  EXPECT_DOUBLE_EQ(c.measured_load_s, 1e-6 + 1e-3);
  EXPECT_DOUBLE_EQ(c.last_recompute_s, 16e-6);
}

// Holds the writer thread before each write until released (KvSpillOptions::before_write).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int waiting = 0;
  void pass() {
    std::unique_lock<std::mutex> lk(mu);
    ++waiting;
    cv.notify_all();
    cv.wait(lk, [&] { return open; });
    --waiting;
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
  void wait_for_writer() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return waiting > 0; });
  }
};

TEST(KvSpill, PendingWritesAreServedFromTheQueueAndFlushedToIdenticalFiles) {
  TempDir d;
  const int bs = 4;
  const size_t bytes = 300;
  const KvBlockFormat f{1, 2, bs, bytes, "k f32 v f32"};
  Gate gate;
  auto s = KvSpill::create({.dir = d.p.string(), .before_write = [&](uint64_t) { gate.pass(); }}, f);
  ASSERT_TRUE(s.ok()) << s.message();
  struct Release {  // a failed assertion still lets the writer go (the destructor waits for it)
    Gate& g;
    ~Release() { g.release(); }
  } release{gate};
  const int n = KvSpill::queue_capacity(f);  // no spill waits
  ASSERT_EQ(n, 1024);                        // 316-byte records: the most blocks
  for (int i = 1; i <= n; ++i) (*s)->spill(record(static_cast<uint64_t>(i), bs, bytes, i));
  gate.wait_for_writer();  // it holds block 1, nothing is written yet
  EXPECT_EQ((*s)->stats().queue_blocks, n);
  EXPECT_EQ((*s)->stats().disk_blocks, 0);
  for (int i = 1; i <= n; ++i) {
    const KvBlockRecord want = record(static_cast<uint64_t>(i), bs, bytes, i);
    ASSERT_EQ((*s)->where(want.hash), KvTier::disk) << i;
    EXPECT_FALSE((*s)->fetch(want.hash, want.parent + 1, want.tokens)) << "another parent: not this block";
    auto got = (*s)->fetch(want.hash, want.parent, want.tokens);
    ASSERT_TRUE(got) << i;
    EXPECT_EQ(got->bytes, want.bytes) << i;
    EXPECT_EQ(got->tokens, want.tokens) << i;
  }
  KvSpillStats st = (*s)->stats();
  EXPECT_EQ(st.queue_hits, static_cast<uint64_t>(n));
  EXPECT_EQ(st.disk_hits, static_cast<uint64_t>(n));
  // One more spill finds the queue full: it waits (on its own thread here) until a write ends.
  std::thread extra([&] { (*s)->spill(record(1u << 20, bs, bytes, 7)); });  // a new hash
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((*s)->stats().queue_waits == 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::yield();
  EXPECT_EQ((*s)->stats().queue_waits, 1u) << "the extra spill found room in a full queue";
  gate.release();
  extra.join();
  ASSERT_TRUE((*s)->flush().ok());
  st = (*s)->stats();
  EXPECT_EQ(st.queue_blocks, 0);
  EXPECT_EQ(st.disk_blocks, n + 1);
  EXPECT_EQ(st.queue_waits, 1u);
  EXPECT_EQ(st.spilled_disk_bytes, static_cast<uint64_t>(n + 1) * bytes);
  (*s).reset();  // as a restart: the files alone
  auto t = KvDiskTier::open(d.p.string(), f);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ((*t)->blocks(), n + 1);
  for (int i = 1; i <= n; ++i) {
    auto r = (*t)->read(static_cast<uint64_t>(i));
    ASSERT_TRUE(r.ok()) << r.message();
    const KvBlockRecord want = record(static_cast<uint64_t>(i), bs, bytes, i);
    EXPECT_TRUE(r->names(want.hash, want.parent, want.tokens));
    EXPECT_EQ(r->bytes, want.bytes) << i;
  }
}

TEST(KvSpill, TheDestructorWritesWhatIsQueuedAndFailedWritesAreCounted) {
  TempDir d;
  const KvBlockFormat f{1, 2, 4, 300, "k f32 v f32"};
  {
    auto s = KvSpill::create({.dir = d.p.string()}, f);
    ASSERT_TRUE(s.ok());
    for (uint64_t h = 1; h <= 10; ++h) (*s)->persist(record(h, 4, 300, static_cast<int>(h)));
  }  // no flush: the destructor drains the queue
  auto t = KvDiskTier::open(d.p.string(), f);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->blocks(), 10);
  auto s = KvSpill::create({.dir = d.p.string()}, f);
  ASSERT_TRUE(s.ok());
  (*s)->spill(record(77, 4, 299, 77));  // not this format's size: the write fails, the block is dropped
  const Status st = (*s)->flush();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("1 KV block files could not be written"), std::string::npos) << st.message();
  EXPECT_EQ((*s)->stats().write_errors, 1u);
  EXPECT_EQ((*s)->stats().dropped_blocks, 1u);
  EXPECT_EQ((*s)->where(77), KvTier::none);
  EXPECT_TRUE((*s)->flush().ok());  // counted once
}

TEST(KvDiskTier, TheByteBudgetDeletesTheLeastRecentlyUsedFiles) {
  TempDir d;
  const KvBlockFormat f{11, 22, 4, 300, "k f16 v f16"};
  const uint64_t fb = KvDiskTier::file_bytes(f);
  auto exists = [&](uint64_t h) {
    return fs::exists(d.p / (std::string(15, '0') + std::to_string(h) + ".kvb"));
  };
  {
    auto t = KvDiskTier::open(d.p.string(), f, 3 * fb + fb / 2);  // three files
    ASSERT_TRUE(t.ok());
    EXPECT_EQ((*t)->file_bytes(), fb);
    for (uint64_t h = 1; h <= 3; ++h) ASSERT_TRUE((*t)->write(record(h, 4, 300, static_cast<int>(h))).ok());
    ASSERT_TRUE((*t)->read(1).ok());  // 1 is the most recently used now: 2 goes first
    ASSERT_TRUE((*t)->write(record(4, 4, 300, 4)).ok());
    EXPECT_EQ((*t)->blocks(), 3);
    EXPECT_EQ((*t)->evicted(), 1);
    EXPECT_LE((*t)->bytes(), (*t)->budget());
    EXPECT_FALSE((*t)->contains(2));
    EXPECT_FALSE(exists(2));
    EXPECT_TRUE(exists(1) && exists(3) && exists(4));
    auto tiny = KvDiskTier::open(d.p.string() + "/tiny", f, fb - 1);
    ASSERT_TRUE(tiny.ok());
    EXPECT_FALSE((*tiny)->fits_one());
  }
  // Reopened under a budget of two files: the oldest by modification time goes (3, then 1, 4).
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(d.p / "0000000000000003.kvb", now - std::chrono::hours(3));
  fs::last_write_time(d.p / "0000000000000001.kvb", now - std::chrono::hours(2));
  fs::last_write_time(d.p / "0000000000000004.kvb", now - std::chrono::hours(1));
  auto t = KvDiskTier::open(d.p.string(), f, 2 * fb);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->blocks(), 2);
  EXPECT_EQ((*t)->evicted(), 1);
  EXPECT_FALSE(exists(3));
  EXPECT_TRUE((*t)->contains(1) && (*t)->contains(4));
}

TEST(KvSpill, TheSsdBudgetHoldsThroughTheWriter) {
  TempDir d;
  const KvBlockFormat f{1, 2, 4, 300, "k f32 v f32"};
  const uint64_t fb = KvDiskTier::file_bytes(f);
  auto s = KvSpill::create({.dir = d.p.string(), .disk_budget = 5 * fb}, f);
  ASSERT_TRUE(s.ok());
  for (uint64_t h = 1; h <= 12; ++h) (*s)->spill(record(h, 4, 300, static_cast<int>(h)));
  ASSERT_TRUE((*s)->flush().ok());
  const KvSpillStats st = (*s)->stats();
  EXPECT_EQ(st.disk_budget, 5 * fb);
  EXPECT_EQ(st.disk_blocks, 5);
  EXPECT_EQ(st.disk_evicted, 7);
  EXPECT_LE(st.disk_bytes, 5 * fb);
  for (uint64_t h = 8; h <= 12; ++h) EXPECT_EQ((*s)->where(h), KvTier::disk) << h;  // the newest
  EXPECT_EQ((*s)->where(1), KvTier::none);
  auto under = KvSpill::create({.dir = d.p.string() + "/x", .disk_budget = fb - 1}, f);
  ASSERT_TRUE(under.ok());
  (*under)->spill(record(1, 4, 300, 1));  // no block file fits: dropped, nothing written
  ASSERT_TRUE((*under)->flush().ok());
  EXPECT_EQ((*under)->stats().dropped_blocks, 1u);
  EXPECT_EQ((*under)->stats().disk_blocks, 0);
}

}  // namespace
}  // namespace strata
