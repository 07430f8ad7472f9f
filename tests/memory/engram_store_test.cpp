// The Engram store on the V4.1 fixtures (../shared/fixtures-v41): rows served from the SSD tier
// under a budget smaller than the tables equal the resident rows bit for bit (prefetch on and
// off, and the RAM tier); hit / miss / byte accounting on a hand-traced CLOCK sequence; prefetch
// turns rows() misses into hits; read faults are errors naming the file and offset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "format/safetensors_dir.h"
#include "memory/engram/engram_store.h"
#include "memory/io_test_util.h"
#include "model/deepseek_v41/v41_engram.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

// deep: Engram layers 0, 3, 6 with 384, 552, 724 rows of 32 columns (config.json).
const int kDeepLayers[3] = {0, 3, 6};
const int64_t kDeepRows[3] = {384, 552, 724};
constexpr int kHd = 32;

struct Deep {
  std::unique_ptr<SafetensorsDir> dir;
  std::vector<EngramTable> tables;
  explicit Deep(const std::string& root) {
    auto d = SafetensorsDir::open(root + "/deep");
    EXPECT_TRUE(d.ok()) << d.message();
    dir = std::move(d).value();
    for (int k = 0; k < 3; ++k) {
      auto t = engram_table_from_checkpoint(*dir, kDeepLayers[k], kDeepRows[k], kHd);
      EXPECT_TRUE(t.ok()) << t.message();
      tables.push_back(*t);
    }
  }
  // The resident path's row: v41::engram_dequant_row on the mapped F32 tensors.
  std::vector<float> resident_row(int k, int64_t r) const {
    const std::string p = "layers." + std::to_string(kDeepLayers[k]) + ".engram.embed.";
    const float* v = reinterpret_cast<const float*>(dir->find(p + "weight")->data);
    const float* s = reinterpret_cast<const float*>(dir->find(p + "scale")->data);
    std::vector<float> out(kHd);
    v41::engram_dequant_row(v + r * kHd, s + r * (kHd / 32), kHd, out.data());
    return out;
  }
};

uint64_t cover(uint64_t off, uint64_t len) {
  return io_align_up(off + len) - io_align_down(off);
}

TEST(EngramTable, FromCheckpointAndErrors) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  Deep d(root);
  ASSERT_EQ(d.tables.size(), 3u);
  EXPECT_EQ(d.tables[0].vtype, EngramValueType::f32);
  EXPECT_EQ(d.tables[0].stype, EngramScaleType::f32);
  EXPECT_EQ(d.tables[0].row_bytes(), 32u * 4 + 4);
  EXPECT_EQ(d.tables[2].bytes(), 724u * 132);
  // shape mismatch names the tensor, expected vs actual
  auto bad = engram_table_from_checkpoint(*d.dir, 0, 385, kHd);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("layers.0.engram.embed.weight"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("expected [385, 32]"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("[384, 32]"), std::string::npos) << bad.message();
  auto missing = engram_table_from_checkpoint(*d.dir, 1, 384, kHd);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("layers.1.engram.embed.weight is missing"), std::string::npos)
      << missing.message();
  // a non-Engram tensor of the wrong dtype: layer 1's attention sink is F32, wq_a is BF16
  auto badhd = engram_table_from_checkpoint(*d.dir, 0, 384, 33);
  ASSERT_FALSE(badhd.ok());
  EXPECT_NE(badhd.message().find("multiple of 32"), std::string::npos) << badhd.message();
}

// Streams random steps of rows through a store and compares every row with the resident one.
void expect_bit_identical(const Deep& d, EngramStore& st, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int step = 0; step < steps; ++step) {
    const int n_tok = 1 + static_cast<int>(rng() % 4);
    std::vector<std::vector<int64_t>> ids(3);
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < n_tok * 6; ++j) {
        // a skewed draw: half the rows from a small hot set, so the cache both hits and misses
        const int64_t r =
            (rng() % 2) ? static_cast<int64_t>(rng() % 16) : static_cast<int64_t>(rng() % kDeepRows[k]);
        ids[k].push_back(r);
      }
    st.begin_step(n_tok);
    for (int k = 0; k < 3; ++k) st.prefetch(k, ids[k].data(), static_cast<int64_t>(ids[k].size()));
    for (int k = 0; k < 3; ++k) {
      std::vector<float> out(ids[k].size() * kHd);
      Status s = st.rows(k, ids[k].data(), static_cast<int64_t>(ids[k].size()), out.data());
      ASSERT_TRUE(s.ok()) << s.message();
      for (size_t j = 0; j < ids[k].size(); ++j) {
        const std::vector<float> want = d.resident_row(k, ids[k][j]);
        ASSERT_EQ(0, std::memcmp(want.data(), out.data() + j * kHd, kHd * sizeof(float)))
            << "table " << k << " row " << ids[k][j] << " step " << step;
      }
    }
    st.end_step();
  }
}

TEST(EngramStore, StreamedRowsEqualResidentRows) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  Deep d(root);
  uint64_t table_bytes = 0;
  for (const auto& t : d.tables) table_bytes += t.bytes();
  for (bool prefetch : {true, false}) {
    EngramStoreOptions o;
    o.budget_bytes = 40 * (132 + EngramStore::kSlotOverhead);  // 40 rows of 1660
    o.prefetch = prefetch;
    o.io_threads = 2;
    o.io_depth = 4;
    o.min_slots = 6;
    auto st = EngramStore::open(d.tables, o);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ((*st)->info().tier, "ssd");
    EXPECT_EQ((*st)->info().n_slots, 40);
    EXPECT_LE((*st)->info().cache_bytes, o.budget_bytes);
    EXPECT_LT((*st)->info().cache_bytes, table_bytes);
    expect_bit_identical(d, **st, 60, 11);
    const EngramStats s = (*st)->stats();
    EXPECT_GT(s.totals.misses + s.totals.late, 0u);
    EXPECT_GT(s.totals.hits, 0u);
    EXPECT_GT(s.totals.evictions, 0u);
    EXPECT_EQ(s.totals.read_errors, 0u);
    EXPECT_EQ(s.totals.lookups, s.totals.hits + s.totals.late + s.totals.misses);
    if (!prefetch) {
      EXPECT_EQ(s.totals.prefetch_issued, 0u);
    }
  }
  // The RAM tier: a budget that holds every table loads them at open; every lookup hits.
  EngramStoreOptions o;
  o.budget_bytes = table_bytes;
  auto st = EngramStore::open(d.tables, o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ((*st)->info().tier, "ram");
  expect_bit_identical(d, **st, 10, 12);
  const EngramStats s = (*st)->stats();
  EXPECT_EQ(s.totals.hits, s.totals.lookups);
  EXPECT_EQ(s.totals.row_bytes, table_bytes);
}

// Three slots, prefetch off, one table: a CLOCK sequence traced by hand.
TEST(EngramStore, HitMissBytesAccountingIsExact) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  Deep d(root);
  EngramStoreOptions o;
  o.budget_bytes = 3 * (132 + EngramStore::kSlotOverhead) + 100;  // 3 slots, not 4
  o.prefetch = false;
  o.io_threads = 1;
  auto st = EngramStore::open({d.tables[0]}, o);
  ASSERT_TRUE(st.ok()) << st.message();
  EngramStore& s = **st;
  ASSERT_EQ(s.info().n_slots, 3);
  const EngramTable& t = d.tables[0];
  auto bytes_of = [&](int64_t r) { return cover(t.value_offset(r), 128) + cover(t.scale_offset(r), 4); };
  std::vector<float> out(8 * kHd);
  auto call = [&](std::vector<int64_t> ids) {
    s.begin_step(1);
    ASSERT_TRUE(s.rows(0, ids.data(), static_cast<int64_t>(ids.size()), out.data()).ok());
    s.end_step();
  };
  // [1 2 3]: three misses fill slots 0, 1, 2 (reference bits set).
  call({1, 2, 3});
  // [1 1 4]: 1 hits, its repeat hits; 4 misses: the hand passes slot 0 (in use by this call),
  // clears slots 1 and 2, comes round and evicts slot 1 (row 2).
  call({1, 1, 4});
  EXPECT_TRUE(s.is_cached(0, 1));
  EXPECT_FALSE(s.is_cached(0, 2));
  EXPECT_TRUE(s.is_cached(0, 3));
  EXPECT_TRUE(s.is_cached(0, 4));
  // [2]: miss; the hand is at slot 2 (row 3, bit cleared): row 3 goes.
  call({2});
  EXPECT_FALSE(s.is_cached(0, 3));
  // [3]: miss; slots 0, 1, 2 all referenced: one sweep clears them, slot 0 (row 1) goes.
  call({3});
  EXPECT_FALSE(s.is_cached(0, 1));
  EXPECT_TRUE(s.is_cached(0, 2));
  EXPECT_TRUE(s.is_cached(0, 3));
  EXPECT_TRUE(s.is_cached(0, 4));
  const EngramStats x = s.stats();
  EXPECT_EQ(x.totals.lookups, 8u);
  EXPECT_EQ(x.totals.hits, 2u);
  EXPECT_EQ(x.totals.late, 0u);
  EXPECT_EQ(x.totals.misses, 6u);
  EXPECT_EQ(x.totals.evictions, 3u);
  EXPECT_EQ(x.totals.reads, 6u);
  EXPECT_EQ(x.totals.row_bytes, 6u * 132);
  const uint64_t want = bytes_of(1) + bytes_of(2) + bytes_of(3) + bytes_of(4) + bytes_of(2) + bytes_of(3);
  EXPECT_EQ(x.totals.bytes_read, want);
  ASSERT_EQ(x.steps.size(), 4u);
  EXPECT_EQ(x.steps[1].hits, 2u);
  EXPECT_EQ(x.steps[1].misses, 1u);
  EXPECT_EQ(x.steps[1].bytes_read, bytes_of(4));
  EXPECT_EQ(x.totals.tokens, 4);
  // Every miss waited (the read cannot complete while rows() holds the store's lock).
  EXPECT_GT(x.totals.stall_s, 0.0);
  EXPECT_GT(x.steps[3].stall_s, 0.0);
}

// Prefetch at step start + compute that outlasts the reads: rows() finds everything resident.
TEST(EngramStore, PrefetchTurnsMissesIntoHits) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  Deep d(root);
  EngramStats by_mode[2];
  for (int on = 0; on < 2; ++on) {
    EngramStoreOptions o;
    o.budget_bytes = 64 * (132 + EngramStore::kSlotOverhead);
    o.prefetch = on == 1;
    o.io_threads = 2;
    auto st = EngramStore::open(d.tables, o);
    ASSERT_TRUE(st.ok()) << st.message();
    std::mt19937 rng(5);
    std::vector<float> out(6 * kHd);
    for (int step = 0; step < 30; ++step) {
      std::vector<std::vector<int64_t>> ids(3);
      for (int k = 0; k < 3; ++k)
        for (int j = 0; j < 6; ++j) ids[k].push_back(static_cast<int64_t>(rng() % kDeepRows[k]));
      (*st)->begin_step(1);
      for (int k = 0; k < 3; ++k) (*st)->prefetch(k, ids[k].data(), 6);
      (*st)->wait_idle();  // the "compute" before the Engram layers takes longer than the reads
      for (int k = 0; k < 3; ++k) ASSERT_TRUE((*st)->rows(k, ids[k].data(), 6, out.data()).ok());
      (*st)->end_step();
    }
    by_mode[on] = (*st)->stats();
  }
  const EngramTotals& off = by_mode[0].totals;
  const EngramTotals& on = by_mode[1].totals;
  EXPECT_EQ(off.lookups, 30u * 18);
  EXPECT_EQ(on.lookups, 30u * 18);
  EXPECT_GT(off.misses, 300u);  // random rows of ~1660: mostly cold
  EXPECT_EQ(on.misses, 0u);
  EXPECT_EQ(on.late, 0u);
  EXPECT_EQ(on.stall_s, 0.0);
  EXPECT_GT(off.stall_s, 0.0);
  EXPECT_GT(on.prefetch_issued, 300u);
  EXPECT_EQ(on.prefetch_used, on.prefetch_issued);  // every prefetched row was asked for
  EXPECT_EQ(on.prefetch_wasted, 0u);
  EXPECT_EQ(on.prefetch_dropped, 0u);
}

TEST(EngramStore, BudgetBelowOneTokenIsAnError) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  Deep d(root);
  EngramStoreOptions o;
  o.budget_bytes = 5 * (132 + EngramStore::kSlotOverhead);
  o.min_slots = 6;
  auto st = EngramStore::open(d.tables, o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("holds 5 Engram rows; the minimum is 6 rows"), std::string::npos)
      << st.message();
}

TEST(EngramStore, OutOfRangeRowIsAnError) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  Deep d(root);
  EngramStoreOptions o;
  o.budget_bytes = 64 * 1024;
  auto st = EngramStore::open(d.tables, o);
  ASSERT_TRUE(st.ok()) << st.message();
  const int64_t ids[2] = {3, 384};
  std::vector<float> out(2 * kHd);
  Status s = (*st)->rows(0, ids, 2, out.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layers.0.engram.embed.weight: row 384 requested, the table has 384 rows"),
            std::string::npos)
      << s.message();
}

// Faults through the injected file: EIO names the file and offset; short reads still give the
// exact rows; a file that changed size is an error; the store keeps working after an error.
TEST(EngramStore, ReadFaultsAreErrorsNamingFileAndOffset) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  Deep d(root);
  FaultyFile* faulty = nullptr;
  IoOpener opener = [&](const std::string& path, bool direct) -> Result<std::unique_ptr<IoFile>> {
    STRATA_ASSIGN(auto inner, io_open_file(path, direct));
    auto f = std::make_unique<FaultyFile>(std::move(inner));
    faulty = f.get();
    return std::unique_ptr<IoFile>(std::move(f));
  };
  EngramStoreOptions o;
  o.budget_bytes = 32 * (132 + EngramStore::kSlotOverhead);
  o.prefetch = false;
  o.io_threads = 1;
  auto st = EngramStore::open(d.tables, o, opener);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_NE(faulty, nullptr);
  std::vector<float> out(4 * kHd);
  // short reads (unaligned ones force re-reads from the page boundary): exact rows
  faulty->short_reads = 2;
  int64_t ids[2] = {10, 300};
  ASSERT_TRUE((*st)->rows(0, ids, 2, out.data()).ok());
  for (int j = 0; j < 2; ++j)
    EXPECT_EQ(0, std::memcmp(d.resident_row(0, ids[j]).data(), out.data() + j * kHd, kHd * 4));
  faulty->short_reads = 0;
  // EIO from the offset of table 1's row 7 on
  const EngramTable& t1 = d.tables[1];
  faulty->fail_errno = EIO;
  faulty->fail_from = io_align_down(t1.value_offset(7));
  int64_t bad = 7;
  Status s = (*st)->rows(1, &bad, 1, out.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(d.tables[1].path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("offset " + std::to_string(io_align_down(t1.value_offset(7)))),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("row 7"), std::string::npos) << s.message();
  EXPECT_EQ((*st)->stats().totals.read_errors, 1u);
  // the fault cleared, the same row reads fine (the failed slot was freed, not cached)
  faulty->fail_errno = 0;
  ASSERT_TRUE((*st)->rows(1, &bad, 1, out.data()).ok());
  EXPECT_EQ(0, std::memcmp(d.resident_row(1, 7).data(), out.data(), kHd * 4));
}

TEST(EngramStore, FileThatChangedSizeIsAnError) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  const std::string tmp = "/tmp/strata_engram_" + std::to_string(::getpid());
  fs::create_directories(tmp);
  fs::copy_file(root + "/deep/model.safetensors", tmp + "/model.safetensors",
                fs::copy_options::overwrite_existing);
  {
    auto dir = SafetensorsDir::open(tmp);
    ASSERT_TRUE(dir.ok()) << dir.message();
    auto t = engram_table_from_checkpoint(**dir, 6, 724, kHd);
    ASSERT_TRUE(t.ok()) << t.message();
    EngramStoreOptions o;
    o.budget_bytes = 16 * 1024;
    o.prefetch = false;
    auto st = EngramStore::open({*t}, o);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(0,
              ::truncate((tmp + "/model.safetensors").c_str(), static_cast<off_t>(t->values_offset + 1000)));
    std::vector<float> out(kHd);
    int64_t r = 500;
    Status s = (*st)->rows(0, &r, 1, out.data());
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("changed size"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(tmp + "/model.safetensors"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("offset " + std::to_string(t->value_offset(500))), std::string::npos)
        << s.message();
  }
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace strata
