// The KV cache's spill tiers through the engine (runtime/engine_kv.cpp, kv/kv_spill.h) on the
// bundled smoke model: a prefix evicted from the pool and loaded back from RAM or SSD gives the
// same tokens and bit-identical logprobs (log_softmax of the raw logits) as recomputing it and as
// a prefix that never left the pool; a prefix persisted with --prefix-cache-dir survives an engine
// restart bit for bit; files of other KV types are ignored and corrupted files are recomputed,
// each with a message naming the file. TTFT of a 1,024-token prefix per tier is printed (not
// asserted; STRATA_ENGINE_KV_MODEL runs it on another model, e.g. the bundled one).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "model/model.h"
#include "runtime/engine.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

const Model& smoke() {
  static std::unique_ptr<Model> m = [] {
    const char* other = std::getenv("STRATA_ENGINE_KV_MODEL");
    const std::string path = other ? other : testing::source_dir() + "/tests/data/bundled_smoke.gguf";
    auto r = Model::load(path, {.n_threads = 2});
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? std::move(*r) : nullptr;
  }();
  return *m;
}

std::vector<int32_t> tokens(int n, int seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37 + seed * 11 + 5) % smoke().n_vocab());
  return t;
}

struct Out {
  std::vector<int32_t> ids;
  std::vector<TokenLogprob> lp;
  CompletionEvent last;
};

// Greedy, with the 5 most likely tokens' logprobs of every sampled row.
Out run1(Engine& e, std::vector<int32_t> prompt, int n_predict = 8) {
  CompletionParams p;
  p.prompt = std::move(prompt);
  p.n_predict = n_predict;
  p.ignore_eos = true;
  p.return_tokens = true;
  p.logprobs = 5;
  p.sampling.temp = 0.0f;
  Out o;
  bool done = false;
  auto id = e.submit(p, [&](const CompletionEvent& ev) {
    o.ids.insert(o.ids.end(), ev.tokens.begin(), ev.tokens.end());
    o.lp.insert(o.lp.end(), ev.logprobs.begin(), ev.logprobs.end());
    if (ev.done) {
      done = true;
      o.last = ev;
    }
    return true;
  });
  EXPECT_TRUE(id.ok()) << id.message();
  for (int i = 0; i < 100000 && e.step(); ++i) {
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(o.last.finish, FinishReason::length) << o.last.error;
  return o;
}

void expect_same(const Out& a, const Out& b, const std::string& what) {
  EXPECT_EQ(a.ids, b.ids) << what;
  ASSERT_EQ(a.lp.size(), b.lp.size()) << what;
  for (size_t i = 0; i < a.lp.size(); ++i) {
    EXPECT_EQ(a.lp[i].logprob, b.lp[i].logprob) << what << " row " << i;  // bit for bit
    ASSERT_EQ(a.lp[i].top.size(), b.lp[i].top.size());
    for (size_t j = 0; j < a.lp[i].top.size(); ++j) {
      EXPECT_EQ(a.lp[i].top[j].id, b.lp[i].top[j].id) << what;
      EXPECT_EQ(a.lp[i].top[j].logprob, b.lp[i].top[j].logprob) << what << " row " << i;
    }
  }
}

std::unique_ptr<Engine> engine(EngineOptions eo, int n_ctx = 160, KvTypes kv = {}) {
  eo.manual_step = true;
  eo.n_slots = 1;
  auto e = Engine::for_model(smoke(), {.n_ctx = n_ctx, .kv = kv}, eo);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? std::move(*e) : nullptr;
}

uint64_t block_bytes() {
  static const uint64_t b = engine({})->kv_pool()->block_bytes();
  return b;
}

struct TempDir {
  fs::path p = fs::temp_directory_path() / ("strata_kvspill_e_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(p); }
  ~TempDir() { fs::remove_all(p); }
};

// P: 4 full blocks + 6 tokens (78 positions with 8 generated: 5 blocks); Q: as long, other tokens.
// With 6 blocks in the pool, Q evicts P's blocks 3, 2, 1 (a freed chain's tail goes first).
const std::vector<int32_t>& prompt_p() {
  static const auto p = tokens(70, 1);
  return p;
}
const std::vector<int32_t>& prompt_q() {
  static const auto q = tokens(70, 2);
  return q;
}

TEST(EngineKvSpill, EvictedPrefixFromRamOrSsdGivesTheSameLogits) {
  EngineOptions big;
  auto never = engine(big);
  const Out recompute = run1(*never, prompt_p());  // nothing cached: every position computed
  const Out pool_hit = run1(*never, prompt_p());
  EXPECT_EQ(recompute.last.n_cached, 0);
  EXPECT_EQ(pool_hit.last.n_cached, 64);
  expect_same(pool_hit, recompute, "pool hit vs recompute");

  TempDir d;
  struct Case {
    const char* name;
    int64_t ram;
    bool dir;
    int cached;  // of the third run
  };
  // RAM of the pool's size; no RAM (only block 0 stays in the pool); 1 block of RAM over an SSD tier.
  for (const Case& c : {Case{"ram", -1, false, 64}, Case{"none", 0, false, 16},
                        Case{"ssd", static_cast<int64_t>(block_bytes()), true, 64}}) {
    EngineOptions eo;
    eo.kv_budget = 6 * block_bytes();
    eo.cache_ram = c.ram;
    if (c.dir) eo.prefix_cache_dir = d.p.string();
    auto e = engine(eo);
    ASSERT_EQ(e->kv_pool()->n_blocks(), 6);
    expect_same(run1(*e, prompt_p()), recompute, std::string(c.name) + ": first");
    run1(*e, prompt_q());
    const Out again = run1(*e, prompt_p());
    EXPECT_EQ(again.last.n_cached, c.cached) << c.name;
    expect_same(again, recompute, std::string(c.name) + ": evicted and found again");
    const KvPoolStats s = e->kv_pool()->stats();
    EXPECT_GE(s.pool_hits, 1u) << c.name;
    const std::string n = c.name;
    EXPECT_EQ(s.spill.ram_hits, n == "ram" ? 3u : 0u) << n;
    EXPECT_EQ(s.spill.disk_hits, n == "ssd" ? 3u : 0u) << n;
    EXPECT_EQ(s.spill.ram_on || s.spill.disk_on, n != "none") << n;
    const std::string m = e->metrics_text();
    EXPECT_NE(m.find("strata_kv_tier_hits_total{tier=\"ram\"}"), std::string::npos);
    EXPECT_NE(m.find("strata_kv_part_bytes{part=\"k\"}"), std::string::npos);
    EXPECT_NE(m.find("strata_kv_fragmentation"), std::string::npos);
  }
}

TEST(EngineKvSpill, PersistedPrefixSurvivesARestart) {
  EngineOptions big;
  const Out want = run1(*engine(big), prompt_p());
  TempDir d;
  EngineOptions eo;
  eo.prefix_cache_dir = d.p.string();
  expect_same(run1(*engine(eo), prompt_p()), want, "before the restart");  // its end persists 4 blocks
  auto e = engine(eo);
  EXPECT_EQ(e->kv_pool()->stats().spill.disk_blocks, 4);
  const Out after = run1(*e, prompt_p());
  EXPECT_EQ(after.last.n_cached, 64);
  EXPECT_EQ(e->kv_pool()->stats().spill.disk_hits, 4u);
  expect_same(after, want, "after the restart");
}

TEST(EngineKvSpill, FilesOfOtherTypesAreIgnoredCorruptedOnesRecomputed) {
  EngineOptions big;
  const Out want = run1(*engine(big), prompt_p());
  TempDir d;
  EngineOptions eo;
  eo.prefix_cache_dir = d.p.string();
  run1(*engine(eo), prompt_p());  // 4 block files at f32
  {
    const KvTypes f16{KvType::f16, KvType::f16, true, false};
    auto e = engine(eo, 160, f16);
    const KvDiskTier* t = e->kv_pool()->disk_tier();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->blocks(), 0);
    EXPECT_EQ(t->ignored(), 4);
    ASSERT_FALSE(t->messages().empty());
    EXPECT_NE(t->messages()[0].find(d.p.string()), std::string::npos) << t->messages()[0];
    EXPECT_NE(t->messages()[0].find("other KV types"), std::string::npos) << t->messages()[0];
    EXPECT_EQ(run1(*e, prompt_p()).last.n_cached, 0);
  }
  for (const auto& f : fs::directory_iterator(d.p)) {  // flip each f32 file's last byte
    if (f.path().extension() != ".kvb") continue;
    std::ifstream in(f.path(), std::ios::binary);
    std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    if (b.find("f16") != std::string::npos) continue;  // the f16 engine's own files
    b.back() = static_cast<char>(b.back() ^ 1);
    std::ofstream(f.path(), std::ios::binary | std::ios::trunc) << b;
  }
  auto e = engine(eo);
  const Out got = run1(*e, prompt_p());
  expect_same(got, want, "corrupted files recomputed");
  EXPECT_EQ(got.last.n_cached, 0);
  const KvDiskTier* t = e->kv_pool()->disk_tier();
  EXPECT_GE(e->kv_pool()->stats().spill.load_errors, 1u);
  bool named = false;
  for (const auto& m : t->messages())
    named = named || (m.find(".kvb") != std::string::npos && m.find("checksum") != std::string::npos);
  EXPECT_TRUE(named);
}

// --prefix-cache-dir-size: evicted blocks go to SSD (no RAM tier) through the writer thread, the
// least recently used file is deleted past the budget, and a prefix continues from what is left
// with the same logits.
TEST(EngineKvSpill, TheSsdBudgetKeepsTheNewestBlocks) {
  EngineOptions big;
  const Out recompute = run1(*engine(big), prompt_p());
  TempDir d;
  EngineOptions eo;
  eo.kv_budget = 6 * block_bytes();
  eo.cache_ram = 0;
  eo.prefix_cache_dir = d.p.string();
  {
    auto probe = engine(eo);
    eo.prefix_cache_dir_size = 2 * probe->kv_pool()->disk_tier()->file_bytes();
  }
  fs::remove_all(d.p);
  auto e = engine(eo);
  expect_same(run1(*e, prompt_p()), recompute, "first");
  run1(*e, prompt_q());  // evicts P's blocks 3, 2, 1 to SSD: 3's file goes past the budget
  ASSERT_TRUE(e->kv_pool()->flush_spill().ok());
  KvSpillStats s = e->kv_pool()->stats().spill;
  EXPECT_EQ(s.disk_blocks, 2);
  EXPECT_EQ(s.disk_evicted, 1);
  EXPECT_EQ(s.spill_blocks, 3u);
  EXPECT_EQ(s.queue_blocks, 0);
  const Out again = run1(*e, prompt_p());
  EXPECT_EQ(again.last.n_cached, 48);  // block 0 from the pool, 1 and 2 from SSD, 3 recomputed
  expect_same(again, recompute, "blocks 1 and 2 from SSD under the budget");
  EXPECT_EQ(e->kv_pool()->stats().spill.disk_hits, 2u);
  const std::string m = e->metrics_text();
  EXPECT_NE(m.find("strata_kv_ssd_evicted_blocks_total"), std::string::npos);
  EXPECT_NE(m.find("strata_kv_ssd_budget_bytes " + std::to_string(eo.prefix_cache_dir_size)),
            std::string::npos);
  EXPECT_NE(m.find("strata_kv_spill_seconds_total"), std::string::npos);
}

// Fragmentation: the rows of referenced blocks no sequence asked for (the last block's tail).
TEST(EngineKvSpill, FragmentationIsTheLastBlocksTail) {
  auto e = engine({});
  bool done = false;
  CompletionParams p;
  p.prompt = prompt_p();
  p.n_predict = 3;
  ASSERT_TRUE(e->submit(p, [&](const CompletionEvent& ev) {
                 done = done || ev.done;
                 return true;
               }).ok());
  e->step();  // the 70-token prompt in 5 blocks (80 rows)
  KvPoolStats s = e->kv_pool()->stats();
  EXPECT_EQ(s.blocks.used, 5);
  EXPECT_EQ(s.unused_rows, 10);
  EXPECT_DOUBLE_EQ(s.fragmentation, 10.0 / 80.0);
  for (int i = 0; i < 100 && e->step(); ++i) {
  }
  EXPECT_TRUE(done);
  s = e->kv_pool()->stats();
  EXPECT_EQ(s.unused_rows, 0);
  EXPECT_EQ(s.fragmentation, 0.0);
}

// TTFT of a prompt on a 1,024-token prefix found in the pool, in RAM, on SSD, and recomputed.
TEST(EngineKvSpill, PrefixTtftPerTier) {
  TempDir d;
  const auto prefix = tokens(1024, 7);
  auto with_tail = [&](int i) {
    auto p = prefix;
    const auto tail = tokens(4, 100 + i);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  // 66 blocks: a 1,028-token sequence takes 65; `other` (66 blocks) evicts all 64 of the prefix.
  const auto other = tokens(1050, 8);
  EngineOptions eo;
  eo.kv_budget = 66 * block_bytes();
  double recompute = 0, pool = 0, ram = 0, ssd = 0, ram_load = 0, ssd_load = 0;
  Out ref;
  {
    auto e = engine(eo, 1100);
    ref = run1(*e, with_tail(0), 2);
    recompute = ref.last.ttft_s;
    const Out p = run1(*e, with_tail(1), 2);
    pool = p.last.ttft_s;
    EXPECT_EQ(p.last.n_cached, 1024);
    run1(*e, other, 2);  // evicts the prefix to RAM
    const Out r = run1(*e, with_tail(0), 2);
    ram = r.last.ttft_s;
    ram_load = e->kv_pool()->stats().spill.last_measured_s;
    EXPECT_EQ(r.last.n_cached, 1024);
    EXPECT_EQ(e->kv_pool()->stats().spill.ram_hits, 64u);
    expect_same(r, ref, "RAM hit of 1,024 tokens");
    std::printf("[ kv tiers ] the same prompt again, from the pool: TTFT %.2f ms\n",
                run1(*e, with_tail(0), 2).last.ttft_s * 1e3);
  }
  eo.prefix_cache_dir = d.p.string();
  run1(*engine(eo, 1100), with_tail(0), 2);  // persisted at its end
  {
    auto e = engine(eo, 1100);
    const Out s = run1(*e, with_tail(0), 2);
    ssd = s.last.ttft_s;
    ssd_load = e->kv_pool()->stats().spill.last_measured_s;
    EXPECT_EQ(s.last.n_cached, 1024);
    EXPECT_EQ(e->kv_pool()->stats().spill.disk_hits, 64u);
    expect_same(s, ref, "SSD hit of 1,024 tokens");
  }
  std::printf(
      "[ kv tiers ] TTFT, 1,024-token prefix + 4: recompute %.2f ms, pool %.2f ms, RAM %.2f ms (load %.2f), "
      "SSD %.2f ms (load %.2f) (block %llu B)\n",
      recompute * 1e3, pool * 1e3, ram * 1e3, ram_load * 1e3, ssd * 1e3, ssd_load * 1e3,
      static_cast<unsigned long long>(block_bytes()));
}

}  // namespace
}  // namespace strata
