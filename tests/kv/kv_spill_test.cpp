// The spill tiers of the KV cache on their own (kv/kv_ram_tier.h, kv/kv_disk_tier.h): the RAM
// tier's LRU under its byte budget, block files round-tripped, and files of another model, KV
// types or layout ignored, garbage, truncated and corrupted files rejected with messages that
// name them (never a crash, never a wrong block).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

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
  auto s = KvSpill::create({2 * fp, d.p.string()}, f);
  ASSERT_TRUE(s.ok()) << s.message();
  for (uint64_t h = 1; h <= 3; ++h) (*s)->spill(record(h, 4, 300, static_cast<int>(h)));
  EXPECT_EQ((*s)->where(1), KvTier::disk);
  EXPECT_EQ((*s)->where(3), KvTier::ram);
  const KvBlockRecord one = record(1, 4, 300, 1);
  auto got = (*s)->fetch(1, one.parent, one.tokens);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bytes, one.bytes);
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
}

}  // namespace
}  // namespace strata
