// The expert store on a synth model: exact bytes under eviction (with and without prefetch),
// pinning, the minimum budget, read faults, resident mode, statistics and traces.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "memory/experts/expert_store.h"
#include "memory/io_test_util.h"
#include "memory/store_test_util.h"

namespace strata {
namespace {

// Every store test runs on both I/O backends (io_uring skipped where the kernel refuses it).
class ExpertStoreTest : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() { model_ = new SynthModelFile("store_test", 3, 8, 2, "q8_0"); }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  static SynthModelFile* model_;
  const GgufFile& f() { return *model_->file; }
  void SetUp() override {
    if (GetParam() == std::string("uring") && !io_uring_usable())
      GTEST_SKIP() << "io_uring is not available here (the threads backend is tested)";
  }
  // A scratch path of this backend's case in this process: ctest runs the cases in parallel.
  std::string tmp_name(const char* what, const char* ext) const {
    return "/tmp/strata_store_" + std::string(what) + "_" + GetParam() + "_" + std::to_string(::getpid()) +
           ext;
  }

  Result<std::unique_ptr<ExpertStore>> open(int slots, bool prefetch, IoOpener opener = nullptr,
                                            const std::string& trace = "", const std::string& profile = "") {
    ExpertStoreOptions o;
    ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
    o.budget_bytes = c.slot_bytes() * static_cast<uint64_t>(slots) + 100;
    o.prefetch = prefetch;
    o.io_threads = 2;
    o.io_depth = 4;
    o.io_backend = GetParam();
    o.routing_trace_path = trace;
    o.profile_path = profile;
    return ExpertStore::open(f(), 3, 8, 2, o, std::make_unique<TestLru>(), std::move(opener));
  }
};
SynthModelFile* ExpertStoreTest::model_ = nullptr;

TEST_P(ExpertStoreTest, CatalogSlotsHoldCovers) {
  ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
  EXPECT_EQ(c.slot_bytes() % kIoAlign, 0u);
  EXPECT_EQ(c.n_present_layers(), 3);
  size_t sum = 0;
  for (int p = 0; p < expert_part_count; ++p) sum += c.part_bytes(0, p);
  EXPECT_EQ(c.expert_bytes(0), sum);
  EXPECT_EQ(c.routed_bytes(), uint64_t{sum} * 8 * 3);
  EXPECT_GE(c.slot_bytes(), sum);
  EXPECT_LE(c.slot_bytes(), sum + 6 * kIoAlign);
  // The mapping view of expert e is the slice the model would use.
  const TensorView* up = f().find_tensor("blk.1.ffn_up_exps.weight");
  ASSERT_TRUE(up);
  EXPECT_EQ(c.view(1, 5, expert_part_up, nullptr).data, up->slice2d(5).data);
  auto off = gguf_tensor_file_offset(f(), *up);
  ASSERT_TRUE(off.ok()) << off.message();
  EXPECT_EQ(c.part_offset(1, 0, expert_part_up), *off);
}

TEST_P(ExpertStoreTest, ExactBytesUnderEviction) {
  for (bool prefetch : {false, true}) {
    auto s = open(3, prefetch);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ((*s)->info().n_slots, 3);
    StoreDriver d(**s, f(), 3, 8, 2, 11);
    for (int step = 0; step < 40; ++step) ASSERT_TRUE(d.step()) << "step " << step;
    ExpertStats st = (*s)->stats();
    const ExpertTotals& t = st.totals();
    EXPECT_EQ(t.accesses(), uint64_t{40} * 3 * 2);
    EXPECT_GT(t.misses, 0u);
    EXPECT_GT(t.bytes_read, 0u);
    EXPECT_EQ(t.read_errors, 0u);
    EXPECT_LE((*s)->resident_count(), 3);
    EXPECT_EQ(st.steps().size(), 40u);
    if (prefetch) {
      EXPECT_GT(t.pred_true_pos + t.pred_false_pos, 0u);
    }
  }
}

TEST_P(ExpertStoreTest, AllFitMeansNoRereads) {
  auto s = open(24, true);
  ASSERT_TRUE(s.ok()) << s.message();
  StoreDriver d(**s, f(), 3, 8, 2, 5);
  for (int step = 0; step < 60; ++step) ASSERT_TRUE(d.step());
  const ExpertTotals t = (*s)->stats().totals();
  ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
  EXPECT_LE(t.reads, 24u);  // every expert read at most once
  EXPECT_EQ(t.evictions, 0u);
  EXPECT_EQ(t.bytes_read, t.reads * c.expert_bytes(0));
}

TEST_P(ExpertStoreTest, PinnedExpertIsNeverEvicted) {
  auto s = open(2, false);
  ASSERT_TRUE(s.ok()) << s.message();
  ExpertStore& st = **s;
  ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
  st.begin_step(1);
  auto held = st.acquire(0, 3);
  ASSERT_TRUE(held.ok()) << held.message();
  for (int e = 0; e < 8; ++e) {
    if (e == 3) continue;
    auto v = st.acquire(1, e);
    ASSERT_TRUE(v.ok()) << v.message();
    EXPECT_TRUE(views_match(*v, c, 1, e));
    st.release(1, e);
  }
  EXPECT_TRUE(st.is_resident(0, 3));
  EXPECT_TRUE(views_match(*held, c, 0, 3));
  st.release(0, 3);
  st.end_step();
}

TEST_P(ExpertStoreTest, PromptStepWantingMoreExpertsThanSlots) {
  // A prompt step whose tokens select all 8 experts of a layer, with only 2 slots: every expert
  // must still be served (no deadlock on "protected" experts of the running layer).
  ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
  for (bool prefetch : {false, true}) {
    auto s = open(2, prefetch);
    ASSERT_TRUE(s.ok()) << s.message();
    ExpertStore& st = **s;
    st.begin_step(4);
    const int32_t sel[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const float w[8] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    std::vector<float> x(4 * 64, 0.1f);
    for (int l = 0; l < 3; ++l) {
      st.on_route(l, x.data(), 4, sel, w, 2);
      for (int e = 7; e >= 0; --e) {
        auto v = st.acquire(l, e);
        ASSERT_TRUE(v.ok()) << v.message();
        EXPECT_TRUE(views_match(*v, c, l, e));
        st.release(l, e);
      }
    }
    st.end_step();
  }
}

TEST_P(ExpertStoreTest, BudgetBelowTopKNamesTheMinimum) {
  auto s = open(1, true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("minimum"), std::string::npos) << s.message();
  ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
  EXPECT_NE(s.message().find(std::to_string(2 * c.slot_bytes())), std::string::npos) << s.message();
}

TEST_P(ExpertStoreTest, ReadErrorNamesFileAndOffsetAndRecovers) {
  ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
  FaultyFile* faulty = nullptr;
  auto opener = [&](const std::string& path, bool direct) -> Result<std::unique_ptr<IoFile>> {
    STRATA_ASSIGN(auto inner, io_open_file(path, direct));
    auto ff = std::make_unique<FaultyFile>(std::move(inner));
    faulty = ff.get();
    return std::unique_ptr<IoFile>(std::move(ff));
  };
  for (bool prefetch : {false, true}) {
    auto s = open(3, prefetch, opener);
    ASSERT_TRUE(s.ok()) << s.message();
    faulty->fail_errno = EIO;
    faulty->fail_from = io_align_down(c.part_offset(2, 0, expert_part_gate));  // layer 2 is unreadable
    ExpertStore& st = **s;
    st.begin_step(1);
    const int32_t sel[2] = {1, 2};
    const float w[2] = {0.5f, 0.5f};
    std::vector<float> x(64, 0.1f);
    st.on_route(2, x.data(), 1, sel, w, 2);
    auto v = st.acquire(2, 1);
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.message().find(model_->path), std::string::npos) << v.message();
    EXPECT_NE(v.message().find("offset"), std::string::npos) << v.message();
    EXPECT_NE(v.message().find("layer 2 expert 1"), std::string::npos) << v.message();
    // Layer 0 still reads fine, and a later retry of layer 2 succeeds once the fault is gone.
    auto ok0 = st.acquire(0, 4);
    ASSERT_TRUE(ok0.ok()) << ok0.message();
    EXPECT_TRUE(views_match(*ok0, c, 0, 4));
    st.release(0, 4);
    faulty->fail_errno = 0;
    auto again = st.acquire(2, 1);
    ASSERT_TRUE(again.ok()) << again.message();
    EXPECT_TRUE(views_match(*again, c, 2, 1));
    st.release(2, 1);
    st.end_step();
    EXPECT_GT(st.stats().totals().read_errors, 0u);
  }
}

TEST_P(ExpertStoreTest, ShortReadsGiveExactBytes) {
  auto opener = [](const std::string& path, bool direct) -> Result<std::unique_ptr<IoFile>> {
    STRATA_ASSIGN(auto inner, io_open_file(path, direct));
    auto ff = std::make_unique<FaultyFile>(std::move(inner));
    ff->short_reads = 1;
    return std::unique_ptr<IoFile>(std::move(ff));
  };
  auto s = open(4, true, opener);
  ASSERT_TRUE(s.ok()) << s.message();
  StoreDriver d(**s, f(), 3, 8, 2, 21);
  for (int step = 0; step < 20; ++step) ASSERT_TRUE(d.step());
}

TEST_P(ExpertStoreTest, ResidentModeServesTheMappingAndCounts) {
  ExpertStoreOptions o;
  const std::string trace = tmp_name("trace", ".jsonl");
  o.routing_trace_path = trace;
  auto s = ExpertStore::open(f(), 3, 8, 2, o, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  ExpertStore& st = **s;
  ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
  st.begin_step(2);
  const int32_t sel[4] = {1, 2, 2, 7};
  const float w[4] = {0.75f, 0.25f, 0.5f, 0.5f};
  std::vector<float> x(128, 0.1f);
  st.on_route(1, x.data(), 2, sel, w, 2);
  auto v = st.acquire(1, 7);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->down.data, c.view(1, 7, expert_part_down, nullptr).data);
  st.release(1, 7);
  st.end_step();
  ExpertStats stats = st.stats();
  EXPECT_EQ(stats.activation(1, 2), 2u);
  EXPECT_EQ(stats.activation(1, 7), 1u);
  EXPECT_EQ(stats.totals().hits, 3u);  // distinct experts of the step
  std::ifstream in(trace);
  std::string l0, l1;
  std::getline(in, l0);
  std::getline(in, l1);
  EXPECT_EQ(l0, "{\"token_idx\":0,\"layer\":1,\"experts\":[1,2],\"weights\":[0.75,0.25]}");
  EXPECT_EQ(l1, "{\"token_idx\":1,\"layer\":1,\"experts\":[2,7],\"weights\":[0.5,0.5]}");
  std::remove(trace.c_str());
}

TEST_P(ExpertStoreTest, StatsAndProfileRoundTrip) {
  auto s = open(3, true);
  ASSERT_TRUE(s.ok());
  StoreDriver d(**s, f(), 3, 8, 2, 4);
  for (int step = 0; step < 10; ++step) ASSERT_TRUE(d.step());
  const std::string json = tmp_name("stats", ".json"), csv = tmp_name("prof", ".csv");
  ASSERT_TRUE((*s)->write_stats(json).ok());
  ASSERT_TRUE((*s)->save_profile(csv).ok());
  std::ifstream in(json);
  std::stringstream ss;
  ss << in.rdbuf();
  for (const char* key :
       {"\"hit_rate\"", "\"bytes_read\"", "\"stall_ms_per_token\"", "\"prefetch_precision\"",
        "\"prefetch_recall\"", "\"prefetch_wasted_bytes\"", "\"activations\"", "\"steps\""})
    EXPECT_NE(ss.str().find(key), std::string::npos) << key;
  std::vector<uint64_t> counts(24, 0);
  auto hot = expert_profile_load(csv, 3, 8, &counts);
  ASSERT_TRUE(hot.ok()) << hot.message();
  ExpertStats st = (*s)->stats();
  uint64_t total = 0;
  for (int l = 0; l < 3; ++l)
    for (int e = 0; e < 8; ++e) {
      EXPECT_EQ(counts[l * 8 + e], st.activation(l, e));
      total += counts[l * 8 + e];
    }
  EXPECT_EQ(total, uint64_t{10} * 3 * 2);
  ASSERT_FALSE(hot->empty());
  EXPECT_GE(st.activation((*hot)[0].layer, (*hot)[0].expert),
            st.activation(hot->back().layer, hot->back().expert));
  // Bad profiles are errors naming the line.
  {
    std::ofstream bad(csv);
    bad << "layer,expert,count\n0,1,5\n9,0,1\n";
  }
  auto b = expert_profile_load(csv, 3, 8);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.message().find("line 3"), std::string::npos) << b.message();
  std::remove(json.c_str());
  std::remove(csv.c_str());
}

TEST_P(ExpertStoreTest, LayerMissesGoToTheEngineInOneSubmission) {
  auto s = open(6, true);
  ASSERT_TRUE(s.ok()) << s.message();
  ExpertStore& st = **s;
  ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
  st.begin_step(1);
  const int32_t sel[2] = {3, 6};
  const float w[2] = {0.5f, 0.5f};
  std::vector<float> x(64, 0.1f);
  st.on_route(1, x.data(), 1, sel, w, 2);
  const ExpertTotals t = st.stats().totals();
  EXPECT_EQ(t.misses, 2u);
  EXPECT_EQ(t.io_jobs - 0, 2u + t.prefetch_issued);  // both misses (+ look-ahead predictions)
  EXPECT_EQ(t.io_submits, t.prefetch_issued ? 2u : 1u) << "misses urgent in one call, predictions in one";
  for (int32_t e : sel) {
    auto v = st.acquire(1, e);
    ASSERT_TRUE(v.ok()) << v.message();
    EXPECT_TRUE(views_match(*v, c, 1, e));
    st.release(1, e);
  }
  st.end_step();
  EXPECT_EQ(std::string(st.info().io_backend), GetParam());
}

// The naive baseline's reads are the compute thread's: with the sync engine all read time is stall.
TEST_P(ExpertStoreTest, SyncReadTimeIsStall) {
  if (GetParam() != std::string("sync")) GTEST_SKIP() << "sync engine only";
  for (bool prefetch : {false, true}) {
    auto s = open(3, prefetch);
    ASSERT_TRUE(s.ok()) << s.message();
    StoreDriver d(**s, f(), 3, 8, 2, 13);
    for (int step = 0; step < 20; ++step) ASSERT_TRUE(d.step()) << "step " << step;
    const ExpertTotals t = (*s)->stats().totals();
    EXPECT_GT(t.reads, 0u);
    EXPECT_EQ(t.late, 0u) << "nothing is ever in flight between calls";
    EXPECT_GE(t.stall_s, t.read_s) << "prefetch " << prefetch;
    EXPECT_EQ((*s)->io_overhead_bytes(), 0u);
  }
}

// --expert-profile warm-starts the store: the profile's hottest experts (up to every slot) are
// resident before the first token, with their exact bytes, counted apart from the per-token numbers;
// a read error while warming fails open() naming the file and offset.
TEST_P(ExpertStoreTest, ProfileWarmStartsTheHottestExperts) {
  const std::string csv = tmp_name("warm", ".csv");
  {
    std::ofstream p(csv);
    p << "layer,expert,count\n0,3,50\n2,7,40\n1,1,30\n0,0,20\n2,2,10\n1,5,0\n";
  }
  ExpertCatalog c = ExpertCatalog::build(f(), 3, 8).value();
  auto s = open(4, /*prefetch=*/false, nullptr, "", csv);  // no look-ahead reads to count
  ASSERT_TRUE(s.ok()) << s.message();
  ExpertStore& st = **s;
  EXPECT_EQ(st.info().warm_experts, 4);
  EXPECT_EQ(st.info().warm_bytes, 4 * c.expert_bytes(0));
  EXPECT_EQ(st.resident_count(), 4);
  for (auto [l, e] : {std::pair{0, 3}, {2, 7}, {1, 1}, {0, 0}})
    EXPECT_TRUE(st.is_resident(l, e)) << l << "," << e;
  EXPECT_FALSE(st.is_resident(2, 2)) << "fifth hottest: no slot left";
  const ExpertTotals t0 = st.stats().totals();
  EXPECT_EQ(t0.reads, 0u);
  EXPECT_EQ(t0.bytes_read, 0u);
  EXPECT_EQ(t0.stall_s, 0.0);
  // The first token hits the warm experts without reading them again.
  st.begin_step(1);
  const int32_t sel[2] = {3, 0};
  const float w[2] = {0.5f, 0.5f};
  std::vector<float> x(64, 0.1f);
  st.on_route(0, x.data(), 1, sel, w, 2);
  for (int32_t e : sel) {
    auto v = st.acquire(0, e);
    ASSERT_TRUE(v.ok()) << v.message();
    EXPECT_TRUE(views_match(*v, c, 0, e));
    st.release(0, e);
  }
  st.end_step();
  EXPECT_EQ(st.stats().totals().hits, 2u);
  EXPECT_EQ(st.stats().totals().reads, 0u);
  s = Result<std::unique_ptr<ExpertStore>>(err("closed"));

  auto opener = [&](const std::string& path, bool direct) -> Result<std::unique_ptr<IoFile>> {
    STRATA_ASSIGN(auto inner, io_open_file(path, direct));
    auto ff = std::make_unique<FaultyFile>(std::move(inner));
    ff->fail_errno = EIO;
    ff->fail_from = io_align_down(c.part_offset(2, 0, expert_part_gate));  // layer 2 is unreadable
    return std::unique_ptr<IoFile>(std::move(ff));
  };
  auto bad = open(4, true, opener, "", csv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("warm start"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find(model_->path), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("offset"), std::string::npos) << bad.message();
  std::remove(csv.c_str());
}

INSTANTIATE_TEST_SUITE_P(Backends, ExpertStoreTest, ::testing::Values("uring", "threads", "sync"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace strata
