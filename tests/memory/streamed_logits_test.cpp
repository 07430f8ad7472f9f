// Streamed experts must not change a single bit: logits with a tiny expert budget (forcing
// eviction on nearly every layer) equal the fully resident run, for every fixture architecture
// and a synth model, in batch (prompt) and incremental (decode) evaluation, with and without
// prefetch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "memory/experts/expert_store.h"
#include "memory/store_test_util.h"
#include "model/hparams.h"
#include "model/model.h"

namespace strata {
namespace {

// Logits of `tokens`: the first n_batch in one eval, the rest one by one. [n][n_vocab].
std::vector<float> run(const std::string& path, const LoadOptions& lo, const std::vector<int32_t>& tokens,
                       size_t n_batch, ExpertStats* stats = nullptr) {
  auto m = Model::load(path, lo);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return {};
  auto s = (*m)->new_session({.n_ctx = static_cast<int>(tokens.size()) + 1, .n_batch = 64});
  EXPECT_TRUE(s.ok()) << s.message();
  const size_t V = static_cast<size_t>((*m)->n_vocab());
  std::vector<float> out(tokens.size() * V);
  Status st = (*s)->eval(std::span<const int32_t>(tokens.data(), n_batch), out.data(), true);
  EXPECT_TRUE(st.ok()) << st.message();
  for (size_t i = n_batch; i < tokens.size() && st.ok(); ++i) {
    st = (*s)->eval(std::span<const int32_t>(&tokens[i], 1), out.data() + i * V, false);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  if (stats && (*m)->expert_store()) *stats = (*m)->expert_store()->stats();
  return out;
}

void expect_streamed_equals_resident(const std::string& path, int n_tokens, size_t n_batch) {
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  std::mt19937 rng(42);
  auto probe = Model::load(path, {});
  ASSERT_TRUE(probe.ok()) << probe.message();
  const HParams& hp = (*probe)->hparams();
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % std::min(509, (*probe)->n_vocab()));
  const std::vector<float> ref = run(path, {}, tokens, n_batch);
  ASSERT_FALSE(ref.empty());
  auto cat = ExpertCatalog::build(**f, hp.n_layer, hp.n_expert);
  ASSERT_TRUE(cat.ok()) << cat.message();
  // The four policy x prefetch mixes on the default engine, and two on the sync one (naive: lru
  // without prefetch; the default policy with prefetch, all of its reads blocking).
  // Last, a profile: the store warm-starts with its hottest experts and seeds the policy.
  const std::string profile = "/tmp/strata_streamed_profile_" + std::to_string(::getpid()) + ".csv";
  {
    FILE* p = std::fopen(profile.c_str(), "w");
    ASSERT_TRUE(p);
    std::fprintf(p, "layer,expert,count\n");
    for (int l = 0; l < hp.n_layer; ++l)
      for (int e = 0; e < hp.n_expert; ++e) std::fprintf(p, "%d,%d,%d\n", l, e, (l * 7 + e * 3) % 11);
    std::fclose(p);
  }
  struct Mix {
    const char* policy;
    bool prefetch;
    const char* backend;
    bool profile = false;
  };
  for (const Mix& mix : {Mix{"lru", false, "auto"}, Mix{"lru", true, "auto"}, Mix{"adaptive", false, "auto"},
                         Mix{"adaptive", true, "auto"}, Mix{"lru", false, "sync"},
                         Mix{"adaptive", true, "sync"}, Mix{"adaptive", true, "auto", true}}) {
    LoadOptions lo;
    lo.experts.budget_bytes = cat->slot_bytes() * static_cast<uint64_t>(hp.n_expert_used);  // the minimum
    lo.experts.policy = mix.policy;
    lo.experts.prefetch = mix.prefetch;
    lo.experts.io_threads = 2;
    lo.experts.io_backend = mix.backend;
    if (mix.profile) lo.experts.profile_path = profile;
    ExpertStats st;
    const std::vector<float> got = run(path, lo, tokens, n_batch, &st);
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)))
        << path << " policy " << mix.policy << " prefetch " << mix.prefetch << " backend " << mix.backend
        << " profile " << mix.profile;
    EXPECT_GT(st.totals().misses, 0u);
    EXPECT_GT(st.totals().evictions, 0u);
    EXPECT_EQ(st.totals().tokens, n_tokens);
  }
  std::remove(profile.c_str());
}

TEST(StreamedLogits, FixtureModelsBitIdentical) {
  STRATA_REQUIRE_FIXTURES(dir);
  for (const char* m : {"tiny-qwen3moe-f32", "tiny-qwen3moe-Q8_0", "tiny-qwen3moe-Q4_0",
                        "tiny-llama-moe-Q8_0", "tiny-qwen2moe-f32", "tiny-qwen2moe-Q8_0", "tiny-gpt-oss-f32",
                        "tiny-gpt-oss-MXFP4_MOE", "tiny-deepseek4-f32", "tiny-deepseek4-MXFP4_MOE"}) {
    SCOPED_TRACE(m);
    expect_streamed_equals_resident(dir + "/models/" + m + ".gguf", 40, 24);
  }
}

TEST(StreamedLogits, SynthModelBitIdentical) {
  SynthModelFile sm("streamed_synth", 4, 16, 4, "q4_0");
  expect_streamed_equals_resident(sm.path, 24, 16);
}

TEST(StreamedLogits, BudgetTooSmallIsALoadError) {
  SynthModelFile sm("streamed_small", 2, 8, 2, "q8_0");
  LoadOptions lo;
  lo.experts.budget_bytes = 4096;
  auto m = Model::load(sm.path, lo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("minimum"), std::string::npos) << m.message();
}

TEST(StreamedLogits, DenseModelRejectsABudget) {
  SynthModelFile sm("streamed_dense", 2, 0, 0, "q8_0", "llama");
  LoadOptions lo;
  lo.experts.budget_bytes = 1 << 20;
  auto m = Model::load(sm.path, lo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("no routed experts"), std::string::npos) << m.message();
}

}  // namespace
}  // namespace strata
