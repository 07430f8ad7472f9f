// Model::decode_batch: several sequences' next tokens in one forward give, row for row, the logits
// each sequence gets alone (up to the kernels' summation order), with prompts of different lengths
// (different positions and cache contents per row), on every standard architecture's fixture
// (incl. gpt-oss's sliding window and sinks) and the bundled MXFP4 model; bad calls are errors
// that append nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/fixtures.h"
#include "model/model.h"

namespace strata {
namespace {

// Greedy next token of a logits row.
int32_t argmax(const float* l, int n) {
  return static_cast<int32_t>(std::max_element(l, l + n) - l);
}

// Three sequences with prompts of 5, 11 and 2 tokens; 6 decode steps batched vs one at a time.
void check_model(const std::string& path, float tol) {
  SCOPED_TRACE(path);
  auto m = Model::load(path, {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  const Model& model = **m;
  ASSERT_TRUE(model.can_decode_batch());
  const int V = model.n_vocab();
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 2, 3, 4, 5}, {7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5}, {9, 3}};
  const size_t ns = prompts.size();
  std::vector<std::unique_ptr<Session>> batched, alone;
  std::vector<int32_t> next(ns);
  std::vector<float> row(static_cast<size_t>(V));
  for (size_t i = 0; i < ns; ++i) {
    for (auto* v : {&batched, &alone}) {
      auto s = model.new_session({.n_ctx = 64, .n_batch = 16});
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_TRUE((*s)->eval(prompts[i], row.data(), false).ok());
      v->push_back(std::move(*s));
    }
    next[i] = argmax(row.data(), V);
  }
  std::vector<float> logits(ns * static_cast<size_t>(V));
  for (int step = 0; step < 6; ++step) {
    std::vector<Session*> ptrs;
    for (auto& s : batched) ptrs.push_back(s.get());
    ASSERT_TRUE(model.decode_batch(ptrs, next, logits.data()).ok());
    for (size_t i = 0; i < ns; ++i) {
      ASSERT_TRUE(alone[i]->eval(std::span<const int32_t>(&next[i], 1), row.data(), false).ok());
      EXPECT_EQ(batched[i]->n_past(), alone[i]->n_past());
      const float* b = logits.data() + i * static_cast<size_t>(V);
      float worst = 0, scale = 0;
      for (int v = 0; v < V; ++v) {
        worst = std::max(worst, std::abs(b[v] - row[static_cast<size_t>(v)]));
        scale = std::max(scale, std::abs(row[static_cast<size_t>(v)]));
      }
      EXPECT_LE(worst, tol * std::max(1.0f, scale)) << "step " << step << " sequence " << i;
      next[i] = argmax(row.data(), V);  // both continue with the single-sequence choice
    }
  }
}

TEST(DecodeBatch, MatchesOneSequenceAtATimeOnFixtures) {
  STRATA_REQUIRE_FIXTURES(dir);
  for (const char* name : {"tiny-qwen3moe-f32", "tiny-llama-moe-f32", "tiny-qwen2moe-f32", "tiny-gpt-oss-f32",
                           "tiny-qwen3moe-Q8_0"})
    check_model(dir + "/models/" + name + ".gguf", 2e-4f);
}

TEST(DecodeBatch, MatchesOneSequenceAtATimeOnTheBundledModel) {
  check_model(testing::source_dir() + "/models/strata-moe-31m-mxfp4.gguf", 2e-3f);
}

TEST(DecodeBatch, BadCallsAreErrorsThatAppendNothing) {
  auto m = Model::load(testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 1});
  ASSERT_TRUE(m.ok()) << m.message();
  auto a = (*m)->new_session({.n_ctx = 4, .n_batch = 1});
  auto b = (*m)->new_session({.n_ctx = 4, .n_batch = 4});
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> logits(2 * static_cast<size_t>((*m)->n_vocab()));
  const int32_t two[2] = {1, 2};
  Session* both[2] = {a->get(), b->get()};
  auto r = (*m)->decode_batch(both, two, logits.data());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("at most 1 tokens per step"), std::string::npos) << r.message();
  Session* twice[2] = {b->get(), b->get()};
  EXPECT_NE((*m)->decode_batch(twice, two, logits.data()).message().find("listed twice"), std::string::npos);
  const int32_t bad[1] = {-3};
  EXPECT_NE(
      (*m)->decode_batch(std::span<Session* const>(both + 1, 1), bad, logits.data()).message().find("-3"),
      std::string::npos);
  EXPECT_FALSE((*m)->decode_batch(std::span<Session* const>(both + 1, 1), two, nullptr).ok());
  auto other = Model::load(testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 1});
  ASSERT_TRUE(other.ok());
  auto c = (*other)->new_session({.n_ctx = 4});
  Session* foreign[1] = {c->get()};
  EXPECT_NE((*m)->decode_batch(foreign, std::span<const int32_t>(two, 1), logits.data())
                .message()
                .find("not a session of this model"),
            std::string::npos);
  EXPECT_EQ((*b)->n_past(), 0);
  const int32_t one[1] = {1};
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE((*m)->decode_batch(std::span<Session* const>(both + 1, 1), one, logits.data()).ok());
  EXPECT_NE((*m)->decode_batch(std::span<Session* const>(both + 1, 1), one, logits.data())
                .message()
                .find("context full"),
            std::string::npos);
}

}  // namespace
}  // namespace strata
