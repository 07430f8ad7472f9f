// The generation loop (a one-slot engine) against a fake model: a session whose logits make a
// scripted token the argmax, and a byte tokenizer. Checks prefill/decode accounting, stopping
// rules, streaming and the generated ids.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/fake_session.h"
#include "runtime/generate.h"

namespace strata {
namespace {

using testing_fakes::ByteTokenizer;
using testing_fakes::EvalRunner;
using testing_fakes::kVocab;
using testing_fakes::ScriptSession;

GenerateOptions greedy(int n) {
  GenerateOptions o;
  o.n_predict = n;
  o.sampling.temp = 0;
  return o;
}

TEST(Generate, GreedyStreamsScriptedText) {
  ByteTokenizer tok;
  EvalRunner runner;
  ScriptSession sess(64, {'a', 'b', 'c', 'd'});
  std::string out;
  auto st = generate(runner, sess, tok, kVocab, "xy", greedy(5), [&](std::string_view t) {
    out += t;
    return true;
  });
  ASSERT_TRUE(st.ok()) << st.message();
  // after the prompt (2 tokens) n_past = 2 -> 'c', then 3 -> 'd', 4 -> 'a', ...
  EXPECT_EQ(out, "cdabc");
  EXPECT_EQ(st->n_prompt, 2);
  EXPECT_EQ(st->n_gen, 5);
  EXPECT_EQ(st->n_decode, 4);  // the last sampled token is not evaluated
  EXPECT_EQ(sess.evals, 5);
  EXPECT_EQ(st->stop, StopReason::n_predict);
  EXPECT_EQ(st->tokens, (std::vector<int32_t>{'c', 'd', 'a', 'b', 'c'}));
  EXPECT_EQ(runner.calls.size(), 5u);  // one forward for the prompt, one per evaluated token
}

TEST(Generate, TokenIdsWithoutATokenizer) {
  EvalRunner runner;
  ScriptSession sess(8, {'a', 'b', 259});
  std::vector<int32_t> got;
  auto st = generate_ids(runner, sess, kVocab, {1, 2}, greedy(-1), [&](int32_t t) {
    got.push_back(t);
    return true;
  });
  ASSERT_TRUE(st.ok()) << st.message();
  // no end-of-generation check without a tokenizer: until the context is full (6 positions left,
  // plus the token sampled from the last evaluation)
  EXPECT_EQ(got, (std::vector<int32_t>{259, 'a', 'b', 259, 'a', 'b', 259}));
  EXPECT_EQ(st->tokens, got);
  EXPECT_EQ(st->stop, StopReason::ctx_full);
}

TEST(Generate, AddsBosWhenVocabSaysSo) {
  ByteTokenizer tok;
  EvalRunner runner;
  tok.bos_ = 257;
  ScriptSession sess(64, {'a'});
  auto st = generate(runner, sess, tok, kVocab, "q", greedy(1), nullptr);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->prompt_tokens.size(), 2u);
  EXPECT_EQ(st->prompt_tokens[0], 257);
}

TEST(Generate, StopsAtEndOfGeneration) {
  ByteTokenizer tok;
  EvalRunner runner;
  ScriptSession sess(64, {'a', 'b', 259, 'c'});
  std::string out;
  auto st = generate(runner, sess, tok, kVocab, "z", greedy(10), [&](std::string_view t) {
    out += t;
    return true;
  });
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(out, "b");
  EXPECT_EQ(st->stop, StopReason::eog);
  auto o = greedy(4);
  o.ignore_eos = true;
  ScriptSession sess2(64, {'a', 'b', 259, 'c'});
  st = generate(runner, sess2, tok, kVocab, "z", o, nullptr);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->n_gen, 4);
}

TEST(Generate, StopsWhenContextIsFull) {
  ByteTokenizer tok;
  EvalRunner runner;
  ScriptSession sess(6, {'a', 'b'});
  auto st = generate(runner, sess, tok, kVocab, "abc", greedy(100), nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(st->stop, StopReason::ctx_full);
  EXPECT_EQ(sess.n_past(), 6);
  EXPECT_EQ(st->n_gen, 4);  // 3 positions left after the prompt, plus the one from the last eval
}

TEST(Generate, PromptLongerThanContextIsAnError) {
  ByteTokenizer tok;
  EvalRunner runner;
  ScriptSession sess(4, {'a'});
  auto st = generate(runner, sess, tok, kVocab, "abcdef", greedy(1), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("prompt is 6 tokens"), std::string::npos) << st.message();
  EXPECT_EQ(sess.evals, 0);
}

TEST(Generate, EmptyPromptIsAnError) {
  ByteTokenizer tok;
  EvalRunner runner;
  ScriptSession sess(4, {'a'});
  auto st = generate(runner, sess, tok, kVocab, "", greedy(1), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("empty"), std::string::npos);
}

TEST(Generate, Utf8SplitAcrossTokensIsHeldBack) {
  ByteTokenizer tok;
  EvalRunner runner;
  // the euro sign's 3 bytes come as 3 tokens: the callback must see it whole
  ScriptSession sess(64, {0xE2, 'x', 0xE2, 0x82, 0xAC});
  std::vector<std::string> pieces;
  auto st = generate(runner, sess, tok, kVocab, "x", greedy(4), [&](std::string_view t) {
    pieces.emplace_back(t);
    return true;
  });
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0], "x");
  EXPECT_EQ(pieces[1], "\xE2\x82\xAC");
}

TEST(Generate, CallbackCanStop) {
  ByteTokenizer tok;
  EvalRunner runner;
  ScriptSession sess(64, {'a', 'b'});
  int calls = 0;
  auto st =
      generate(runner, sess, tok, kVocab, "x", greedy(50), [&](std::string_view) { return ++calls < 3; });
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->stop, StopReason::callback);
  EXPECT_EQ(st->n_gen, 3);
}

}  // namespace
}  // namespace strata
