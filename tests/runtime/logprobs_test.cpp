// Token logprobs: token_logprob is log_softmax of the row with the n most likely tokens, and the
// engine's per-token and prompt logprobs equal log_softmax of the scored rows of the same tokens
// (runtime/generate.h score) within 1e-5, for a request beside another one, whatever its penalties
// and logit bias.
#include "runtime/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <mutex>

#include "common/fixtures.h"
#include "runtime/engine.h"
#include "runtime/generate.h"

namespace strata {
namespace {

// log_softmax(row)[i], summed in long double: the reference.
double ref_logprob(std::span<const float> row, int32_t i) {
  long double mx = row[0], sum = 0;
  for (float v : row) mx = std::max<long double>(mx, v);
  for (float v : row) sum += std::exp(static_cast<long double>(v) - mx);
  return static_cast<double>(row[static_cast<size_t>(i)] - mx - std::log(sum));
}

TEST(TokenLogprob, IsLogSoftmaxWithTheTopN) {
  const std::vector<float> row = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  TokenLogprob lp = token_logprob(row, 2, 3);
  EXPECT_EQ(lp.id, 2);
  EXPECT_NEAR(lp.logprob, ref_logprob(row, 2), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].id, 1);  // equal logits: the lower id first
  EXPECT_EQ(lp.top[1].id, 3);
  EXPECT_EQ(lp.top[2].id, 0);
  for (const TopLogprob& t : lp.top) EXPECT_NEAR(t.logprob, ref_logprob(row, t.id), 1e-6);
  double total = 0;
  for (int32_t i = 0; i < 5; ++i) total += std::exp(token_logprob(row, i, 0).logprob);
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_TRUE(token_logprob(row, 0, 0).top.empty());
  EXPECT_EQ(token_logprob(row, 0, 99).top.size(), 5u);  // at most the vocabulary
  // large logits do not overflow
  const std::vector<float> big = {1000.0f, 999.0f};
  EXPECT_NEAR(token_logprob(big, 1, 0).logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-5);
}

TEST(EngineModel, LogprobsEqualLogSoftmaxOfTheScoredRows) {
  auto m = Model::load(testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  const Model& model = **m;
  const Tokenizer& tok = model.tokenizer();
  EngineOptions eo;
  eo.n_slots = 2;
  eo.prefill_chunk = 3;
  auto e = Engine::for_model(model, {.n_ctx = 96}, eo);
  ASSERT_TRUE(e.ok()) << e.message();
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<TokenLogprob> gen, prompt_lp;
  std::vector<int32_t> gen_ids;
  auto count_done = [&](const CompletionEvent& ev) {
    if (!ev.done) return;
    EXPECT_NE(ev.finish, FinishReason::error) << ev.error;
    ++done;
    cv.notify_all();
  };
  CompletionParams other;  // a sampled request beside: must not change the scored one
  other.prompt = tok.encode("The", true, true);
  other.n_predict = 12;
  other.sampling.temp = 0.9f;
  other.sampling.seed = 7;
  ASSERT_TRUE((*e)->submit(other,
                           [&](const CompletionEvent& ev) {
                             std::lock_guard<std::mutex> lk(mu);
                             count_done(ev);
                             return true;
                           })
                  .ok());
  CompletionParams p;
  p.prompt = tok.encode("It is a truth universally acknowledged", true, true);
  p.n_predict = 10;
  p.sampling.temp = 0.8f;
  p.sampling.seed = 11;
  p.sampling.frequency_penalty = 1.5f;  // penalties and bias do not touch the reported logprobs
  p.sampling.logit_bias = {{5, 4.0f}, {6, -100.0f}};
  p.logprobs = 4;
  p.prompt_logprobs = 2;
  p.return_tokens = true;
  p.ignore_eos = true;
  ASSERT_TRUE((*e)->submit(p,
                           [&](const CompletionEvent& ev) {
                             std::lock_guard<std::mutex> lk(mu);
                             gen.insert(gen.end(), ev.logprobs.begin(), ev.logprobs.end());
                             prompt_lp.insert(prompt_lp.end(), ev.prompt_logprobs.begin(),
                                              ev.prompt_logprobs.end());
                             gen_ids.insert(gen_ids.end(), ev.tokens.begin(), ev.tokens.end());
                             count_done(ev);
                             return true;
                           })
                  .ok());
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(120), [&] { return done == 2; }));
  }
  ASSERT_EQ(gen_ids.size(), 10u);
  ASSERT_EQ(gen.size(), 10u);
  ASSERT_EQ(prompt_lp.size(), p.prompt.size() - 1);
  // The whole sequence scored alone: row i gives the distribution of token i + 1.
  std::vector<int32_t> all = p.prompt;
  all.insert(all.end(), gen_ids.begin(), gen_ids.end());
  const size_t V = static_cast<size_t>(model.n_vocab());
  std::vector<float> rows(all.size() * V);
  auto s = model.new_session({.n_ctx = 96});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(score(model, **s, model.n_vocab(), all, 16, [&](int64_t pos0, std::span<const float> r) {
                std::copy(r.begin(), r.end(), rows.begin() + pos0 * static_cast<int64_t>(V));
                return true;
              }).ok());
  auto check = [&](const TokenLogprob& lp, size_t pos, size_t n_top) {
    SCOPED_TRACE("position " + std::to_string(pos));
    const std::span<const float> row(rows.data() + (pos - 1) * V, V);
    EXPECT_EQ(lp.id, all[pos]);
    EXPECT_NEAR(lp.logprob, ref_logprob(row, all[pos]), 1e-5);
    ASSERT_EQ(lp.top.size(), n_top);
    std::vector<bool> in_top(V, false);
    for (size_t k = 0; k < n_top; ++k) {
      EXPECT_NEAR(lp.top[k].logprob, ref_logprob(row, lp.top[k].id), 1e-5);
      if (k > 0) {
        EXPECT_LE(lp.top[k].logprob, lp.top[k - 1].logprob);
      }
      in_top[static_cast<size_t>(lp.top[k].id)] = true;
    }
    const float last = row[static_cast<size_t>(lp.top.back().id)];
    for (size_t i = 0; i < V; ++i)  // nothing outside the top is likelier than its last
      if (!in_top[i]) {
        EXPECT_LE(row[i], last) << "token " << i;
      }
  };
  for (size_t i = 0; i < prompt_lp.size(); ++i) check(prompt_lp[i], i + 1, 2);
  for (size_t i = 0; i < gen.size(); ++i) check(gen[i], p.prompt.size() + i, 4);
}

}  // namespace
}  // namespace strata
