// Batch invariance (design.md principle 3): a sequence's logits are bit-identical whatever shares its
// batches (alone, or beside 1 / 3 / 15 other sequences that prefill and decode at their own pace),
// however its prompt is chunked (1, 7 or 512 tokens per step), and at 1 or 2 threads — on the
// bundled model (f32 KV, and f16 / q8_0 K with q4_0 V rows read in place), every fixture
// architecture and DeepSeek-V4.1 (a checkpoint directory); per-sequence knobs (profiles, deepseek4's
// indexer top-k) beside neighbours with others. Also:
// Model::forward's bad calls are errors that append nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <random>

#include "common/fixtures.h"
#include "model/model.h"
#include "runtime/profile.h"

namespace strata {
namespace {

constexpr int kPrompt = 20, kDecode = 6, kCtx = 64;

// The target sequence's tokens: a fixed pseudo-random stream (prompt, then "generated" tokens).
std::vector<int32_t> stream(int n_vocab, uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(std::min(n_vocab, 200)));
  return v;
}

// Logits of every position of the target, [kPrompt + kDecode][n_vocab]: its prompt in chunks of
// `chunk`, then one token per step, each step one Model::forward beside `n_others` sequences that
// take random prompt chunks or decode tokens of their own (all their rows want logits too).
// knobs: the target's (model/arch.h SeqKnobs); mixed: the others alternate between no knobs and
// the fast profile's.
std::vector<float> run(const Model& m, int chunk, int n_others, uint32_t seed, const KvTypes& kv,
                       const SeqKnobs& knobs = {}, bool mixed = false, int n_prompt = kPrompt) {
  const int V = m.n_vocab(), n_total = n_prompt + kDecode;
  const auto target = stream(V, 7, n_total);
  std::vector<std::unique_ptr<Session>> sess;
  for (int i = 0; i <= n_others; ++i) {
    auto s = m.new_session({.n_ctx = kCtx, .n_batch = 512, .kv = kv});
    EXPECT_TRUE(s.ok()) << s.message();
    if (i == 0) (*s)->set_knobs(knobs);
    if (i > 0 && mixed && i % 2 == 1) (*s)->set_knobs(profile_knobs(Profile::fast));
    sess.push_back(std::move(*s));
  }
  std::vector<std::vector<int32_t>> other(static_cast<size_t>(n_others));
  for (int i = 0; i < n_others; ++i) other[i] = stream(V, seed + 100 + i, kCtx);
  std::mt19937 rng(seed);
  std::vector<float> out(static_cast<size_t>(n_total) * V), logits;
  std::vector<int32_t> tokens, seq;
  std::vector<uint8_t> want;
  std::vector<Session*> ptrs;
  int done = 0;
  while (done < n_total) {
    tokens.clear();
    seq.clear();
    want.clear();
    ptrs.clear();
    // The others first or after the target, in a random order: rows move around in the batch.
    const bool target_first = rng() % 2 == 0;
    auto add_target = [&] {
      const int n = done < n_prompt ? std::min(chunk, n_prompt - done) : 1;
      for (int i = 0; i < n; ++i) {
        tokens.push_back(target[static_cast<size_t>(done + i)]);
        seq.push_back(static_cast<int32_t>(ptrs.size()));
        want.push_back(1);
      }
      ptrs.push_back(sess[0].get());
      return n;
    };
    int n_target = target_first ? add_target() : 0;
    for (int i = 0; i < n_others; ++i) {
      Session* s = sess[static_cast<size_t>(i) + 1].get();
      const int left = s->n_ctx() - s->n_past();
      if (left <= 0 || rng() % 4 == 0) continue;  // sometimes idle
      const int n = std::min(left, rng() % 3 == 0 ? 1 : 1 + static_cast<int>(rng() % 9));
      for (int k = 0; k < n; ++k) {
        tokens.push_back(other[i][static_cast<size_t>(s->n_past() + k)]);
        seq.push_back(static_cast<int32_t>(ptrs.size()));
        want.push_back(k + 1 == n && rng() % 2 ? 1 : 0);  // a finished prompt chunk, or a decode token
      }
      ptrs.push_back(s);
    }
    if (!target_first) n_target = add_target();
    size_t n_want = 0;
    for (uint8_t w : want) n_want += w;
    logits.assign(n_want * V, 0.0f);
    TokenBatch b(tokens, seq, {}, want);
    Status st = m.forward(ptrs, b, logits.data());
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return {};
    // The target's rows among the wanted ones.
    size_t row = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      if (!want[t]) continue;
      if (seq[t] == (target_first ? 0 : static_cast<int32_t>(ptrs.size()) - 1)) {
        std::memcpy(out.data() + static_cast<size_t>(done) * V, logits.data() + row * V, sizeof(float) * V);
        ++done;
      }
      ++row;
    }
    EXPECT_EQ(sess[0]->n_past(), done);
    (void)n_target;
  }
  return out;
}

void check_model(const std::string& path, std::initializer_list<int> others_counts = {0, 1, 3, 15},
                 const KvTypes& kv = {}) {
  SCOPED_TRACE(path + " KV " + kv_type_name(kv.k) + " / " + kv_type_name(kv.v));
  std::vector<float> ref;
  for (int threads : {1, 2}) {
    auto m = Model::load(path, {.n_threads = threads});
    ASSERT_TRUE(m.ok()) << m.message();
    if (ref.empty()) ref = run(**m, 512, 0, 1, kv);
    ASSERT_FALSE(ref.empty());
    const int V = (*m)->n_vocab();
    for (int chunk : {1, 7, 512})
      for (int others : others_counts) {
        const auto got = run(**m, chunk, others, 1000u * chunk + others, kv);
        ASSERT_EQ(got.size(), ref.size());
        for (size_t i = 0; i < got.size(); ++i)
          if (std::memcmp(&got[i], &ref[i], sizeof(float)) != 0) {
            FAIL() << threads << " threads, chunk " << chunk << ", beside " << others << ": position "
                   << i / V << " logit " << i % V << " is " << got[i] << ", alone " << ref[i];
          }
      }
  }
}

TEST(BatchInvariance, BundledModel) {
  check_model(testing::source_dir() + "/models/strata-moe-31m-mxfp4.gguf");
}

// Typed KV rows: f16, and q8_0 K with q4_0 V (Hadamard-rotated), quantized as they are written
// and read in place by the attention kernels.
TEST(BatchInvariance, BundledModelTypedKv) {
  for (const KvTypes& kv : {KvTypes{KvType::f16, KvType::f16}, KvTypes{KvType::q8_0, KvType::q4_0}})
    check_model(testing::source_dir() + "/models/strata-moe-31m-mxfp4.gguf", {0, 3}, kv);
}

// Per-sequence knobs (a request's profile, runtime/profile.h) change their own sequence only: the
// target with and without the fast profile's knobs (or `fast` given), beside others of both
// profiles, gives the bits it gives alone; and the knobs do change the target's logits. n_prompt:
// the target's prompt tokens (a longer one reaches more of deepseek4's compressed entries than
// half its indexer top-k).
void check_profiles(const std::string& path, const SeqKnobs& fast_knobs = profile_knobs(Profile::fast),
                    int n_prompt = kPrompt) {
  SCOPED_TRACE(path);
  auto m = Model::load(path, {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  const int V = (*m)->n_vocab();
  std::vector<float> refs[2];
  for (int fast = 0; fast < 2; ++fast) {
    const SeqKnobs knobs = fast ? fast_knobs : SeqKnobs{};
    refs[fast] = run(**m, 512, 0, 1, {}, knobs, false, n_prompt);
    ASSERT_FALSE(refs[fast].empty());
    for (int chunk : {1, 7})
      for (int others : {1, 3}) {
        const auto got = run(**m, chunk, others, 77u * chunk + others, {}, knobs, true, n_prompt);
        ASSERT_EQ(got.size(), refs[fast].size());
        for (size_t i = 0; i < got.size(); ++i)
          if (std::memcmp(&got[i], &refs[fast][i], sizeof(float)) != 0)
            FAIL() << (fast ? "fast" : "accurate") << ", chunk " << chunk << ", beside " << others
                   << " of both profiles: position " << i / V << " logit " << i % V << " is " << got[i]
                   << ", alone " << refs[fast][i];
      }
  }
  size_t differ = 0;
  for (size_t i = 0; i < refs[0].size(); ++i) differ += refs[0][i] != refs[1][i];
  EXPECT_GT(differ, refs[0].size() / 10) << "the fast profile changed almost nothing";
}

TEST(BatchInvariance, BundledModelProfiles) {
  check_profiles(testing::source_dir() + "/models/strata-moe-31m-mxfp4.gguf");
}

// deepseek4 drops from its own routing (sqrt-softplus top-k, hash layers) through the same rule.
TEST(BatchInvariance, FixtureProfiles) {
  STRATA_REQUIRE_FIXTURES(dir);
  for (const char* name : {"tiny-qwen3moe-f32", "tiny-deepseek4-f32"})
    check_profiles(dir + "/models/" + name + ".gguf");
}

// deepseek4's indexer top-k per sequence (the fast profile's half; alone here, without the expert
// drop): with a 40-token prompt the target's late queries see up to 11 compressed entries of CSA
// layers, more than 8 of the fixture's 16; its neighbours alternate between the model's top-k and
// the fast profile's.
TEST(BatchInvariance, FixtureIndexTopK) {
  STRATA_REQUIRE_FIXTURES(dir);
  SeqKnobs half;
  half.index_topk_share = 0.5f;
  EXPECT_EQ(half.index_topk(16), 8);
  EXPECT_EQ(half.index_topk(1), 1);
  EXPECT_EQ(SeqKnobs{}.index_topk(16), 16);
  EXPECT_NE(half.salt(), SeqKnobs{}.salt());
  check_profiles(dir + "/models/tiny-deepseek4-f32.gguf", half, 40);
}

// deepseek_v41's index sources take the same per-sequence top-k (sparse fixture: 4 -> 2; a 40-token
// prompt's ratio-2 queries see up to 20 compressed entries): a V4.1 sequence with half the top-k,
// beside others of both, gives the bits it gives alone, and the knob changes its logits.
TEST(BatchInvariance, V41IndexTopK) {
  STRATA_REQUIRE_FIXTURES_V41(dir);
  SeqKnobs half;
  half.index_topk_share = 0.5f;
  check_profiles(dir + "/sparse", half, 40);
}

TEST(BatchInvariance, FixtureArchitectures) {
  STRATA_REQUIRE_FIXTURES(dir);
  for (const char* name : {"tiny-qwen3moe-f32", "tiny-llama-moe-f32", "tiny-qwen2moe-f32", "tiny-gpt-oss-f32",
                           "tiny-qwen3moe-Q8_0", "tiny-llama-moe-Q4_0", "tiny-gpt-oss-MXFP4",
                           "tiny-deepseek4-f32", "tiny-deepseek4-MXFP4_MOE"})
    check_model(dir + "/models/" + name + ".gguf");
}

// The deep fixture (its window ring wraps within the 26 positions; ratio-2 and ratio-1 CSA2
// sources, Reuse / Reindex layers, the two-level selection, Engram; 8 experts top-2 grouped over
// the batch) beside 0 and 2 other sequences: the scalar reference forward is slow, so fewer.
TEST(BatchInvariance, DeepseekV41) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  check_model(root + "/deep", {0, 2});
}

TEST(ModelForward, BadCallsAreErrorsThatAppendNothing) {
  auto m = Model::load(testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 1});
  ASSERT_TRUE(m.ok()) << m.message();
  auto a = (*m)->new_session({.n_ctx = 4, .n_batch = 1});
  auto b = (*m)->new_session({.n_ctx = 4, .n_batch = 4});
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> logits(4 * static_cast<size_t>((*m)->n_vocab()));
  const int32_t two[2] = {1, 2}, seq01[2] = {0, 1};
  Session* both[2] = {a->get(), b->get()};
  auto msg = [&](std::span<Session* const> s, TokenBatch tb, float* l = nullptr) {
    return (*m)->forward(s, tb, l ? l : logits.data()).message();
  };
  Session* twice[2] = {b->get(), b->get()};
  EXPECT_NE(msg(twice, {two, seq01}).find("listed twice"), std::string::npos);
  const int32_t bad[1] = {-3};
  EXPECT_NE(msg(std::span<Session* const>(both + 1, 1), {bad}).find("-3"), std::string::npos);
  EXPECT_FALSE((*m)->forward(both, {two, seq01}, nullptr).ok());
  const int32_t seq_bad[2] = {0, 2};
  EXPECT_NE(msg(both, {two, seq_bad}).find("names sequence 2"), std::string::npos);
  const int32_t three[3] = {1, 2, 3}, seq010[3] = {0, 1, 0};
  EXPECT_NE(msg(both, {three, seq010}).find("not contiguous"), std::string::npos);
  const int64_t pos_bad[2] = {0, 5};
  EXPECT_NE(msg(both, {two, seq01, pos_bad}).find("continues at 0"), std::string::npos);
  auto other = Model::load(testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 1});
  ASSERT_TRUE(other.ok());
  auto c = (*other)->new_session({.n_ctx = 4});
  Session* foreign[1] = {c->get()};
  EXPECT_NE(msg(foreign, {std::span<const int32_t>(two, 1)}).find("not a session of this model"),
            std::string::npos);
  EXPECT_EQ((*a)->n_past(), 0);
  EXPECT_EQ((*b)->n_past(), 0);
  // Two sequences with n_batch 1 and 4: the batch runs in steps of one token, and both advance.
  ASSERT_TRUE((*m)->forward(both, {two, seq01}, logits.data()).ok());
  EXPECT_EQ((*a)->n_past(), 1);
  EXPECT_EQ((*b)->n_past(), 1);
  const int32_t four[4] = {1, 1, 1, 1};
  EXPECT_NE(msg(std::span<Session* const>(both + 1, 1), {four}).find("> n_ctx 4"), std::string::npos);
  EXPECT_EQ((*b)->n_past(), 1);
}

}  // namespace
}  // namespace strata
