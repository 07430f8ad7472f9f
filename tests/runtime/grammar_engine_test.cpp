// Grammar-constrained requests through the engine: on a scripted fake model the grammar overrides
// the script and the request stops when nothing can follow; on the bundled model a constrained
// request beside unconstrained ones leaves their tokens exactly as they are alone, and its own
// text is a sentence of the grammar (or a prefix of one, at the length limit).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "common/fixtures.h"
#include "runtime/engine.h"
#include "runtime/fake_session.h"
#include "runtime/generate.h"
#include "runtime/grammar_matcher.h"

namespace strata {
namespace {

using testing_fakes::ByteTokenizer;
using testing_fakes::EvalRunner;
using testing_fakes::kVocab;
using testing_fakes::ScriptSession;

std::shared_ptr<const Grammar> grammar(const std::string& text) {
  auto g = Grammar::parse(text);
  EXPECT_TRUE(g.ok()) << g.message();
  return std::make_shared<const Grammar>(g.ok() ? std::move(*g) : Grammar());
}

TEST(EngineGrammar, TheGrammarOverridesTheModelAndEndsTheRequest) {
  ByteTokenizer tok;
  EvalRunner runner;
  auto e = Engine::create(runner,
                          [](int) -> Result<std::unique_ptr<Session>> {
                            return std::unique_ptr<Session>(std::make_unique<ScriptSession>(
                                64, std::vector<int32_t>{'h', 'e', 'l', 'l', 'o', '!'}));
                          },
                          &tok, kVocab, {.n_slots = 1, .manual_step = true});
  ASSERT_TRUE(e.ok()) << e.message();
  CompletionParams p;
  p.prompt = {'h'};
  p.n_predict = 20;
  p.sampling.temp = 0;
  p.grammar = grammar("root ::= \"e\" [a-z]* \"?\"");
  std::string text;
  CompletionEvent last;
  ASSERT_TRUE((*e)->submit(p,
                           [&](const CompletionEvent& ev) {
                             text += ev.text;
                             if (ev.done) last = ev;
                             return true;
                           })
                  .ok());
  for (int i = 0; i < 100 && (*e)->step(); ++i) {
  }
  EXPECT_EQ(text, "ello?");  // '!' is not allowed: the best allowed token (all 0: the lowest id) is '?'
  EXPECT_EQ(last.finish, FinishReason::stop);
  EXPECT_EQ(last.n_gen, 5);

  p.grammar = nullptr;
  EXPECT_TRUE((*e)->submit(p, [](const CompletionEvent&) { return true; }).ok());
  auto no_tok = Engine::create(
      runner,
      [](int) -> Result<std::unique_ptr<Session>> {
        return std::unique_ptr<Session>(std::make_unique<ScriptSession>(64, std::vector<int32_t>{'a'}));
      },
      nullptr, kVocab, {.n_slots = 1, .manual_step = true});
  ASSERT_TRUE(no_tok.ok());
  p.grammar = grammar("root ::= \"a\"");
  auto r = (*no_tok)->submit(p, [](const CompletionEvent&) { return true; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "a grammar needs the engine's tokenizer");
}

TEST(EngineModel, AGrammarIsPerRequest) {
  auto m = Model::load(testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  const Model& model = **m;
  const Tokenizer& tok = model.tokenizer();
  const std::vector<std::string> prompts = {"In the beginning", "It is a truth universally acknowledged",
                                            "The"};
  std::vector<SamplerParams> sp(3);
  sp[0].temp = 0;
  sp[1].temp = 0.9f;
  sp[1].seed = 1234;
  sp[2].temp = 0.7f;
  sp[2].seed = 7;
  const std::string gbnf = "root ::= (\" \" [a-z]{1,8}){3,6} \".\"";
  std::vector<std::string> want(3);
  for (size_t i = 0; i < 2; ++i) {
    auto s = model.new_session({.n_ctx = 128});
    ASSERT_TRUE(s.ok());
    GenerateOptions o;
    o.n_predict = 20;
    o.sampling = sp[i];
    auto r = generate(model, **s, tok, model.n_vocab(), prompts[i], o, [&](std::string_view t) {
      want[i] += t;
      return true;
    });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  EngineOptions eo;
  eo.n_slots = 3;
  eo.manual_step = true;
  auto e = Engine::for_model(model, {.n_ctx = 128}, eo);
  ASSERT_TRUE(e.ok()) << e.message();
  std::vector<std::string> got(3);
  std::vector<CompletionEvent> last(3);
  for (size_t i = 0; i < 3; ++i) {
    CompletionParams p;
    p.prompt = tok.encode(prompts[i], true, true);
    p.n_predict = i == 2 ? 40 : 20;
    p.sampling = sp[i];
    if (i == 2) p.grammar = grammar(gbnf);
    auto id = (*e)->submit(p, [&, i](const CompletionEvent& ev) {
      got[i] += ev.text;
      if (ev.done) last[i] = ev;
      return true;
    });
    ASSERT_TRUE(id.ok()) << id.message();
  }
  for (int turn = 0; turn < 1000 && (*e)->step(); ++turn) {
  }
  EXPECT_EQ(got[0], want[0]);
  EXPECT_EQ(got[1], want[1]);
  const Grammar g = *grammar(gbnf);
  if (last[2].finish == FinishReason::stop) {
    EXPECT_TRUE(grammar_matches(g, got[2])) << got[2];
  } else {
    EXPECT_EQ(last[2].finish, FinishReason::length) << last[2].error;
    EXPECT_TRUE(GrammarMatcher(std::make_shared<Grammar>(g)).can_accept(got[2])) << got[2];
  }
  EXPECT_FALSE(got[2].empty());
}

}  // namespace
}  // namespace strata
