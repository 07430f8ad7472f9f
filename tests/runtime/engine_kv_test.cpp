// The engine over a paged KV pool (runtime/engine_kv.cpp) on the bundled smoke model: a prompt that
// shares a cached prefix gives the same text as without the prefix cache (and as contiguous
// slots), prefilling only what follows the prefix; requests whose KV totals several times the
// budget all complete with the same text (the youngest preempted and recomputed; also on gpt-oss,
// whose sliding-window rings stay per sequence); a request that
// can never fit is refused naming its need and the budget; 16 requests on a 1,024-token prefix
// share its 64 blocks (TTFT of the first and the second printed, not asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "model/model.h"
#include "runtime/engine.h"

namespace strata {
namespace {

struct Out {
  std::string text;
  bool done = false;
  CompletionEvent last;
};

// STRATA_ENGINE_KV_MODEL: another model to run these on (the bundled MoE model's TTFT numbers).
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

std::vector<int32_t> tokens(const Model& m, int n, int seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 31 + seed * 7 + 3) % m.n_vocab());
  return t;
}

CompletionParams req(std::vector<int32_t> prompt, int n_predict, uint64_t seed = 0) {
  CompletionParams p;
  p.prompt = std::move(prompt);
  p.n_predict = n_predict;
  p.ignore_eos = true;
  p.return_tokens = true;
  p.sampling.temp = seed ? 0.8f : 0.0f;
  p.sampling.seed = seed;
  return p;
}

// Submits every request (all queued before the first turn), steps until idle.
std::vector<Out> run_all(Engine& e, const std::vector<CompletionParams>& ps) {
  std::vector<Out> out(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    auto id = e.submit(ps[i], [&out, i](const CompletionEvent& ev) {
      for (int32_t t : ev.tokens) out[i].text += std::to_string(t) + " ";
      if (ev.done) {
        out[i].done = true;
        out[i].last = ev;
      }
      return true;
    });
    EXPECT_TRUE(id.ok()) << id.message();
  }
  for (int i = 0; i < 100000 && e.step(); ++i) {
  }
  for (const Out& o : out) EXPECT_TRUE(o.done);
  return out;
}

std::unique_ptr<Engine> engine(EngineOptions eo, int n_ctx = 160, const Model* m = nullptr) {
  eo.manual_step = true;
  auto e = Engine::for_model(m ? *m : smoke(), {.n_ctx = n_ctx}, eo);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? std::move(*e) : nullptr;
}

TEST(EngineKv, PrefixReuseGivesTheSameText) {
  const Model& m = smoke();
  const auto prefix = tokens(m, 70, 1);
  std::vector<CompletionParams> ps;
  for (int i = 0; i < 3; ++i) {
    auto p = prefix;
    const auto tail = tokens(m, 5 + i, 10 + i);
    p.insert(p.end(), tail.begin(), tail.end());
    ps.push_back(req(p, 12, i == 1 ? 77 : 0));
  }
  EngineOptions flat;
  flat.paged_kv = false;
  auto ref = engine(flat);
  ASSERT_TRUE(ref && ref->kv_pool() == nullptr);
  std::vector<Out> want;
  for (const auto& p : ps) want.push_back(run_all(*ref, {p})[0]);
  for (bool cache : {false, true}) {
    EngineOptions eo;
    eo.prefix_cache = cache;
    auto e = engine(eo);
    ASSERT_TRUE(e && e->kv_pool());
    for (size_t i = 0; i < ps.size(); ++i) {  // one after another: the first one's blocks are cached
      const Out got = run_all(*e, {ps[i]})[0];
      EXPECT_EQ(got.text, want[i].text)
          << "request " << i << (cache ? " with" : " without") << " the prefix cache";
      EXPECT_EQ(got.last.n_cached, cache && i > 0 ? 64 : 0) << i;
    }
    const EngineCounters c = e->counters();
    EXPECT_EQ(c.prompt_tokens_cached, cache ? 128u : 0u);
    EXPECT_EQ(c.prompt_tokens_cached + c.prompt_tokens_prefilled, 75u + 76u + 77u);
    EXPECT_NE(e->metrics_text().find("strata_kv_blocks_shared"), std::string::npos);
    // The same prompt again: all but its last partial block (and at least its last token) reused.
    const Out again = run_all(*e, {ps[0]})[0];
    EXPECT_EQ(again.text, want[0].text);
    EXPECT_EQ(again.last.n_cached, cache ? 64 : 0);
  }
}

// m: the model (its sliding-window rings stay per sequence and are recomputed too).
void expect_oversubscribed_same_text(const Model& m) {
  std::vector<CompletionParams> ps;
  for (int i = 0; i < 6; ++i) ps.push_back(req(tokens(m, 30 + 3 * i, 20 + i), 40, i % 2 ? 1000 + i : 0));
  EngineOptions flat;
  flat.paged_kv = false;
  flat.n_slots = 6;
  auto ref = engine(flat, 160, &m);
  const auto want = run_all(*ref, ps);
  EngineOptions eo;
  eo.n_slots = 6;
  auto probe = engine(eo, 160, &m);
  const uint64_t block = probe->kv_pool()->block_bytes();
  // 6 sequences of ~75 positions (5 blocks each, 30 in all) in 8 blocks: ~4x the budget.
  eo.kv_budget = 8 * block;
  for (bool cache : {true, false}) {
    eo.prefix_cache = cache;
    auto e = engine(eo, 160, &m);
    ASSERT_EQ(e->kv_pool()->n_blocks(), 8);
    const auto got = run_all(*e, ps);
    for (size_t i = 0; i < ps.size(); ++i) {
      EXPECT_EQ(got[i].text, want[i].text) << "request " << i;
      EXPECT_EQ(got[i].last.finish, FinishReason::length) << got[i].last.error;
    }
    const EngineCounters c = e->counters();
    EXPECT_GT(c.preemptions, 0u);
    EXPECT_GT(c.recomputed_tokens, 0u);
    EXPECT_EQ(c.requests_ok, ps.size());
    EXPECT_EQ(e->kv_pool()->stats().blocks.used, 0);
    // Sequences holding blocks: at least two after some turn (5 blocks each in 8); no unused rows
    // left behind by preemptions and re-adopted prefixes.
    EXPECT_GE(c.kv_sequences_max, 2);
    EXPECT_LE(c.kv_sequences_max, 6);
    EXPECT_EQ(e->kv_pool()->stats().unused_rows, 0);
    EXPECT_GE(e->kv_pool()->stats().fragmentation_avg, 0.0);
    EXPECT_LT(e->kv_pool()->stats().fragmentation_avg, 1.0);
    // The RAM tier (the pool's bytes by default) takes evicted blocks; every load decision loads
    // at least one block (none is taken while the pool has no room for it).
    const KvSpillStats sp = e->kv_pool()->stats().spill;
    EXPECT_GE(sp.ram_hits + sp.disk_hits, sp.load_decisions);
    EXPECT_LE(sp.loads_beat_recompute, sp.load_decisions);
    if (cache && sp.ram_on) {  // a model whose every KV part is paged (the pool caches prefixes)
      EXPECT_GT(sp.ram_hits, 0u);
    }
    std::printf("[ oversubscribed ] prefix cache %s: %llu preemptions, %llu tokens recomputed\n",
                cache ? "on" : "off", static_cast<unsigned long long>(c.preemptions),
                static_cast<unsigned long long>(c.recomputed_tokens));
  }
}

TEST(EngineKv, OversubscribedRequestsAllCompleteWithTheSameText) {
  expect_oversubscribed_same_text(smoke());
}

TEST(EngineKv, OversubscribedSlidingWindowModel) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto m = Model::load(dir + "/models/tiny-gpt-oss-f32.gguf", {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  expect_oversubscribed_same_text(**m);
}

// gpt-oss (sliding-window layers): the prefix cache works from window-ring checkpoints
// (kv/kv_checkpoints.h). A prompt's checkpoint lets the next prompt on the same prefix start at
// its last block boundary, a finished request's lets a follow-up turn (its prompt, its reply,
// more) start after the reply's last full block; texts equal contiguous slots'. Without
// checkpoints nothing is reused. At -c 160 the window (128) holds the whole context (a second
// prompt on the first 70 tokens: the checkpoint at 64 serves it); at -c 512 with steps of 16 tokens
// the rings (143 rows) wrap, and the same 305-token prompt again starts from the checkpoint at 304
// taken from them. (A prefix is reusable up to the last boundary some sequence saved a checkpoint
// at: its prompt's end, its preemption or its end.)
void expect_sliding_prefix(const Model& m, int n_ctx, int n_ubatch, int n_prefix, bool same_prompt) {
  const auto prefix = tokens(m, n_prefix, 1);
  std::vector<CompletionParams> ps;
  for (int i = 0; i < 2; ++i) {
    auto p = prefix;
    const auto tail = tokens(m, 5 + (same_prompt ? 0 : i), 10 + (same_prompt ? 0 : i));
    p.insert(p.end(), tail.begin(), tail.end());
    ps.push_back(req(p, 12));
  }
  EngineOptions flat;
  flat.paged_kv = false;
  auto ref = engine(flat, n_ctx, &m);
  const int boundary = (same_prompt ? n_prefix + 4 : n_prefix) / 16 * 16, follow = (n_prefix + 16) / 16 * 16;
  for (int cps : {8, 0}) {
    SCOPED_TRACE("-c " + std::to_string(n_ctx) + ", checkpoints " + std::to_string(cps));
    EngineOptions eo;
    eo.ctx_checkpoints = cps;
    eo.n_ubatch = n_ubatch;
    auto e = engine(eo, n_ctx, &m);
    ASSERT_TRUE(e && e->kv_pool());
    EXPECT_EQ(e->kv_pool()->prefix_cache(), cps > 0);
    const Out a = run_all(*e, {ps[0]})[0];
    EXPECT_EQ(a.text, run_all(*ref, {ps[0]})[0].text);
    EXPECT_EQ(a.last.n_cached, 0);
    const Out b = run_all(*e, {ps[1]})[0];
    EXPECT_EQ(b.text, run_all(*ref, {ps[1]})[0].text);
    EXPECT_EQ(b.last.n_cached, cps > 0 ? boundary : 0);
    // The follow-up turn: the first prompt, its reply and three more tokens (the first request
    // evaluated its prompt and 11 of its 12 tokens: its last checkpoint at `follow`).
    CompletionParams c = ps[0];
    std::istringstream reply(a.text);
    for (int32_t t; reply >> t;) c.prompt.push_back(t);
    for (int32_t t : tokens(m, 3, 40)) c.prompt.push_back(t);
    ASSERT_EQ(c.prompt.size(), static_cast<size_t>(n_prefix + 5 + 12 + 3));
    const Out got = run_all(*e, {c})[0];
    EXPECT_EQ(got.text, run_all(*ref, {c})[0].text);
    EXPECT_EQ(got.last.n_cached, cps > 0 ? follow : 0);
    if (cps > 0) {
      const KvCheckpointStats st = e->kv_pool()->stats().checkpoints;
      EXPECT_GE(st.saved, 2u);
      EXPECT_EQ(st.restored, 2u);
      EXPECT_GT(st.bytes, 0u);
    }
  }
}

TEST(EngineKv, SlidingWindowPrefixFromACheckpoint) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto m = Model::load(dir + "/models/tiny-gpt-oss-f32.gguf", {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  expect_sliding_prefix(**m, 160, 512, 70, false);
  expect_sliding_prefix(**m, 512, 16, 300, true);
}

TEST(EngineKv, ARequestThatCanNeverFitIsRefused) {
  const Model& m = smoke();
  EngineOptions eo;
  auto probe = engine(eo);
  eo.kv_budget = 2 * probe->kv_pool()->block_bytes();
  auto e = engine(eo);
  auto id = e->submit(req(tokens(m, 40, 1), 4), [](const CompletionEvent&) { return true; });
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.message().find("needs 3 KV blocks (41 positions"), std::string::npos) << id.message();
  EXPECT_NE(id.message().find("holds 2 blocks"), std::string::npos) << id.message();
  // One that fits the whole pool alone ends with `length` when the pool is its context.
  const auto out = run_all(*e, {req(tokens(m, 20, 2), 100)});
  EXPECT_EQ(out[0].last.finish, FinishReason::length);
  EXPECT_EQ(out[0].last.n_gen, 13);  // 32 positions: 20 + 12 evaluated, the 13th sampled ends it
}

// The target: 16 requests sharing a 1,024-token prefix hold its 64 blocks once, plus one
// block each for the rest; the second request's TTFT against the first's (printed).
TEST(EngineKv, SixteenRequestsShareOneLongPrefix) {
  const Model& m = smoke();
  EngineOptions eo;
  eo.n_slots = 16;
  auto e = engine(eo, 1100);
  const auto prefix = tokens(m, 1024, 5);
  auto with_tail = [&](int i) {
    auto p = prefix;
    const auto tail = tokens(m, 4, 100 + i);
    p.insert(p.end(), tail.begin(), tail.end());
    return req(p, 2);
  };
  const Out first = run_all(*e, {with_tail(0)})[0];
  const Out second = run_all(*e, {with_tail(1)})[0];
  EXPECT_EQ(first.last.n_cached, 0);
  EXPECT_EQ(second.last.n_cached, 1024);
  std::vector<Out> rest(14);
  for (int i = 0; i < 14; ++i)
    ASSERT_TRUE(e->submit(with_tail(2 + i), [&rest, i](const CompletionEvent& ev) {
                   if (ev.done) rest[static_cast<size_t>(i)].done = true;
                   return true;
                 }).ok());
  e->step();  // all 14 admitted on the cached prefix and prefilled in one turn
  const BlockCounts b = e->kv_pool()->stats().blocks;
  EXPECT_EQ(b.shared, 64);
  EXPECT_LE(b.used, 64 + 14);
  for (int i = 0; i < 1000 && e->step(); ++i) {
  }
  for (const Out& o : rest) EXPECT_TRUE(o.done);
  std::printf(
      "[ prefix ] TTFT first %.2f ms, second %.2f ms (%.1fx); %lld blocks used by 14 running, %lld shared\n",
      first.last.ttft_s * 1e3, second.last.ttft_s * 1e3,
      first.last.ttft_s / std::max(second.last.ttft_s, 1e-9), static_cast<long long>(b.used),
      static_cast<long long>(b.shared));
}

}  // namespace
}  // namespace strata
