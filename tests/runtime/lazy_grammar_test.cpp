// A lazy grammar through the engine on a scripted model: the text before the trigger is the script's
// (the grammar would reject it), the call after it is forced into the grammar and ends the request;
// a reply without the trigger is untouched and ends at the model's end of generation; a trigger that
// is one control token (the grammar's `<[id]>`) triggers on that token's id.
#include <gtest/gtest.h>

#include <tuple>

#include "runtime/engine.h"
#include "runtime/fake_session.h"
#include "runtime/lazy_grammar.h"

namespace strata {
namespace {

using testing_fakes::ByteTokenizer;
using testing_fakes::EvalRunner;
using testing_fakes::kVocab;
using testing_fakes::ScriptSession;

// What the engine writes for prompt "h" when the model's script (after its first token) is `script`.
std::pair<std::string, FinishReason> run(
    const std::vector<int32_t>& script, const std::string& trigger,
    const std::string& grammar = R"(root ::= "<tool_call>{\"n\": " [0-9]+ "}</tool_call>")",
    std::vector<int32_t> shown = {}) {
  ByteTokenizer tok;
  tok.names = {"[TOOL_CALLS]"};
  EvalRunner runner;
  auto e = Engine::create(runner,
                          [&](int) -> Result<std::unique_ptr<Session>> {
                            return std::unique_ptr<Session>(std::make_unique<ScriptSession>(64, script));
                          },
                          &tok, kVocab, {.n_slots = 1, .manual_step = true});
  EXPECT_TRUE(e.ok()) << e.message();
  if (!e.ok()) return {};
  CompletionParams p;
  p.prompt = {'h'};
  p.n_predict = 50;
  p.sampling.temp = 0;
  auto g = Grammar::parse(grammar);
  EXPECT_TRUE(g.ok()) << g.message();
  p.grammar = std::make_shared<const Grammar>(std::move(*g));
  p.grammar_trigger = trigger;
  p.shown_tokens = std::move(shown);
  std::string text;
  FinishReason finish = FinishReason::error;
  EXPECT_TRUE((*e)->submit(p,
                           [&](const CompletionEvent& ev) {
                             text += ev.text;
                             if (ev.done) finish = ev.finish;
                             return true;
                           })
                  .ok());
  for (int i = 0; i < 200 && (*e)->step(); ++i) {
  }
  return {text, finish};
}

std::vector<int32_t> script(const std::string& s, bool eos) {
  std::vector<int32_t> v = {'_'};  // position 0: the prompt's
  for (unsigned char c : s) v.push_back(c);
  if (eos) v.push_back(259);
  return v;
}

TEST(LazyGrammar, FreeUntilTheTriggerThenTheGrammar) {
  // 'x' is not a digit: the grammar takes the best allowed token (all 0: the lowest id, '0').
  auto [text, finish] =
      run(script("ok {\"n\": <tool_call>{\"n\": x1}</tool_call> and more", false), "<tool_call>");
  EXPECT_EQ(text, "ok {\"n\": <tool_call>{\"n\": 01}</tool_call>");
  EXPECT_EQ(finish, FinishReason::stop);  // nothing can follow the call
}

TEST(LazyGrammar, WithoutTheTriggerTheTextIsTheModels) {
  auto [text, finish] = run(script("no call here: <tool_cal", true), "<tool_call>");
  EXPECT_EQ(text, "no call here: <tool_cal");
  EXPECT_EQ(finish, FinishReason::stop);
}

// [TOOL_CALLS] is control token 256: the model's token triggers the grammar (its text shown where
// asked); prose before it is free, and the plain-text spelling in the prose is the marker too.
TEST(LazyGrammar, TriggersOnAControlTokenMarker) {
  const std::string grammar = R"(root ::= <[256]> "[{\"n\": " [0-9]+ "}]")";
  std::vector<int32_t> s = script("ok ", false);
  s.push_back(256);
  for (unsigned char c : std::string("[{\"n\": x1}] more")) s.push_back(c);
  auto [text, finish] = run(s, "[TOOL_CALLS]", grammar, {256});
  EXPECT_EQ(text, "ok [TOOL_CALLS][{\"n\": 01}]");
  EXPECT_EQ(finish, FinishReason::stop);
  std::tie(text, finish) = run(s, "[TOOL_CALLS]", grammar);  // not shown: the same tokens, no marker text
  EXPECT_EQ(text, "ok [{\"n\": 01}]");
  // Without the token the text is the model's, "[{" included.
  std::tie(text, finish) = run(script("ok [{\"n\": x1}]", true), "[TOOL_CALLS]", grammar, {256});
  EXPECT_EQ(text, "ok [{\"n\": x1}]");
}

}  // namespace
}  // namespace strata
