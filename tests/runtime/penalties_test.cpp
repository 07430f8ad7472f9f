// OpenAI's presence / frequency penalties (over generated tokens only) and logit bias: the stages on
// their own, through the Sampler, validation, and on the bundled model a penalised, biased request
// beside a plain one leaves the plain one's tokens exactly what they are alone.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "common/fixtures.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace strata {
namespace {

TEST(Penalties, PresenceAndFrequencySubtractPerCount) {
  const std::vector<float> lg = {1.0f, 2.0f, 3.0f, 4.0f};
  Candidates c;
  candidates_from_logits(lg.data(), 4, &c);
  sample_presence_frequency(&c, {{1, 1}, {3, 3}}, 0.5f, 0.25f);
  EXPECT_FLOAT_EQ(c.data[0].logit, 1.0f);
  EXPECT_FLOAT_EQ(c.data[1].logit, 2.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(c.data[2].logit, 3.0f);
  EXPECT_FLOAT_EQ(c.data[3].logit, 4.0f - 0.5f - 0.75f);
  const std::vector<std::pair<int32_t, float>> bias = {{0, 10.0f}, {2, -100.0f}};
  sample_logit_bias(&c, bias);
  EXPECT_FLOAT_EQ(c.data[0].logit, 11.0f);
  EXPECT_FLOAT_EQ(c.data[2].logit, -97.0f);
}

TEST(Penalties, CountGeneratedTokensNotThePrompt) {
  // token 3 leads by 1; a presence penalty of 2 moves the choice once 3 was generated, not before
  const std::vector<float> lg = {0.0f, 0.0f, 2.0f, 3.0f};
  SamplerParams p;
  p.temp = 0;
  p.presence_penalty = 2.0f;
  Sampler s(p, 4);
  const std::vector<int32_t> prompt = {3, 3, 3};
  s.accept_prompt(prompt);
  EXPECT_EQ(s.sample(lg.data()), 3);
  s.accept(3);
  EXPECT_EQ(s.sample(lg.data()), 2);
  s.accept(2);  // both penalised: 3 - 2 > 2 - 2
  EXPECT_EQ(s.sample(lg.data()), 3);
  p.presence_penalty = 0;
  p.frequency_penalty = 0.6f;  // 3 after two: 3 - 1.2 = 1.8 < 2
  Sampler f(p, 4);
  f.accept(3);
  EXPECT_EQ(f.sample(lg.data()), 3);
  f.accept(3);
  EXPECT_EQ(f.sample(lg.data()), 2);
  f.reset();
  EXPECT_EQ(f.sample(lg.data()), 3);
  p.frequency_penalty = 0;
  p.logit_bias = {{3, -100.0f}, {0, 2.5f}};
  Sampler b(p, 4);
  EXPECT_EQ(b.sample(lg.data()), 0);
}

TEST(Penalties, ValidationNamesTheParameter) {
  SamplerParams p;
  p.presence_penalty = 2.5f;
  EXPECT_NE(sampler_params_validate(p).message().find("presence_penalty"), std::string::npos);
  p = {};
  p.frequency_penalty = -3;
  EXPECT_NE(sampler_params_validate(p).message().find("frequency_penalty"), std::string::npos);
  p = {};
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_NE(sampler_params_validate(p).message().find("logit_bias"), std::string::npos);
}

// Runs the requests together on a two-slot engine; returns each one's sampled ids.
std::vector<std::vector<int32_t>> run_together(const Model& model,
                                               const std::vector<CompletionParams>& reqs) {
  EngineOptions eo;
  eo.n_slots = 2;
  auto e = Engine::for_model(model, {.n_ctx = 96}, eo);
  EXPECT_TRUE(e.ok()) << e.message();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<int32_t>> got(reqs.size());
  size_t done = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    CompletionParams p = reqs[i];
    p.return_tokens = true;
    auto id = (*e)->submit(p, [&, i](const CompletionEvent& ev) {
      std::lock_guard<std::mutex> lk(mu);
      got[i].insert(got[i].end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.done) {
        EXPECT_NE(ev.finish, FinishReason::error) << ev.error;
        ++done;
        cv.notify_all();
      }
      return true;
    });
    EXPECT_TRUE(id.ok()) << id.message();
  }
  std::unique_lock<std::mutex> lk(mu);
  EXPECT_TRUE(cv.wait_for(lk, std::chrono::seconds(120), [&] { return done == reqs.size(); }));
  return got;
}

TEST(EngineModel, APenalisedRequestLeavesItsNeighbourAlone) {
  auto m = Model::load(testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  const Model& model = **m;
  CompletionParams plain;
  plain.prompt = model.tokenizer().encode("Once upon a time", true, true);
  plain.n_predict = 24;
  plain.ignore_eos = true;
  plain.sampling.temp = 0;
  CompletionParams pen = plain;
  pen.sampling.frequency_penalty = 2.0f;
  pen.sampling.presence_penalty = 2.0f;
  const std::vector<int32_t> alone = run_together(model, {plain})[0];
  ASSERT_EQ(alone.size(), 24u);
  pen.sampling.logit_bias = {{alone[0], -100.0f}};  // bans the plain request's first token
  const auto both = run_together(model, {pen, plain});
  EXPECT_EQ(both[1], alone);
  ASSERT_EQ(both[0].size(), 24u);
  EXPECT_NE(both[0][0], alone[0]);
  for (int32_t t : both[0]) EXPECT_NE(t, alone[0]);
  // with frequency 2 and presence 2 the penalised one repeats itself less than the plain one
  auto distinct = [](std::vector<int32_t> v) {
    std::sort(v.begin(), v.end());
    return std::unique(v.begin(), v.end()) - v.begin();
  };
  EXPECT_GT(distinct(both[0]), distinct(alone));
  // a bias for a token outside the vocabulary is refused
  auto e = Engine::for_model(model, {.n_ctx = 96}, {.n_slots = 1});
  ASSERT_TRUE(e.ok());
  pen.sampling.logit_bias = {{model.n_vocab(), 1.0f}};
  auto bad = (*e)->submit(pen, [](const CompletionEvent&) { return true; });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("logit_bias"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace strata
