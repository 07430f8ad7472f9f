// Engine: slots, the scheduler's turns (chunked prefill interleaved with decoding), finish
// reasons, stop strings, cancellation, validation and the queue limit — on a scripted fake model
// (driven turn by turn) and on the bundled model (scheduler thread: concurrent requests must give
// exactly what one request at a time gives, with the slots decoded one by one or in one batch).
#include "runtime/engine.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "common/fixtures.h"
#include "runtime/fake_session.h"
#include "runtime/generate.h"

namespace strata {
namespace {

using testing_fakes::ByteTokenizer;
using testing_fakes::EvalRunner;
using testing_fakes::kVocab;
using testing_fakes::ScriptSession;

// Collects one request's events.
struct Got {
  std::string text;
  std::vector<CompletionEvent> events;
  bool done = false;
  CompletionEvent last;
  int cancel_after = -1;  // return false on this text event (0-based)
  CompletionSink sink() {
    return [this](const CompletionEvent& ev) {
      events.push_back(ev);
      text += ev.text;
      if (ev.done) {
        done = true;
        last = ev;
        return true;
      }
      return cancel_after < 0 || static_cast<int>(events.size()) <= cancel_after;
    };
  }
};

CompletionParams params(std::vector<int32_t> prompt, int n_predict) {
  CompletionParams p;
  p.prompt = std::move(prompt);
  p.n_predict = n_predict;
  p.sampling.temp = 0;
  return p;
}

struct FakeEngine {
  ByteTokenizer tok;
  EvalRunner runner;
  std::vector<ScriptSession*> sessions;
  std::unique_ptr<Engine> e;
  FakeEngine(int slots, std::vector<int32_t> script, EngineOptions o = {}, int n_ctx = 64) {
    o.n_slots = slots;
    o.manual_step = true;
    auto r = Engine::create(
        runner,
        [&, script](int) -> Result<std::unique_ptr<Session>> {
          auto s = std::make_unique<ScriptSession>(n_ctx, script);
          sessions.push_back(s.get());
          return std::unique_ptr<Session>(std::move(s));
        },
        &tok, kVocab, o, nullptr);
    EXPECT_TRUE(r.ok()) << r.message();
    e = std::move(*r);
  }
  void run() {
    for (int i = 0; i < 1000 && e->step(); ++i) {
    }
  }
};

TEST(Engine, SlotsRunRequestsAndTheQueueWaits) {
  FakeEngine f(2, {'a', 'b', 'c', 'd'});
  Got g[3];
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.e->submit(params({'x', 'y'}, 3 + i), g[i].sink()).ok());
  f.e->step();  // two admitted, the third waits
  EXPECT_EQ(f.e->counters().running, 2);
  EXPECT_EQ(f.e->counters().waiting, 1);
  f.run();
  EXPECT_EQ(g[0].text, "cda");  // positions 2, 3, 4 -> script[2], script[3], script[0]
  EXPECT_EQ(g[1].text, "cdab");
  EXPECT_EQ(g[2].text, "cdabc");  // a reused slot starts from a reset session
  for (auto& x : g) {
    ASSERT_TRUE(x.done);
    EXPECT_EQ(x.last.finish, FinishReason::length);
    EXPECT_EQ(x.last.n_prompt, 2);
  }
  EXPECT_EQ(g[2].last.n_gen, 5);
  const EngineCounters c = f.e->counters();
  EXPECT_EQ(c.requests_ok, 3u);
  EXPECT_EQ(c.prompt_tokens, 6u);
  EXPECT_EQ(c.gen_tokens, 12u);
  EXPECT_EQ(c.running, 0);
  EXPECT_EQ(f.e->metrics_text().find("strata_expert_hit_rate"), std::string::npos);  // no store
  EXPECT_NE(f.e->metrics_text().find("strata_generation_tokens_total 12\n"), std::string::npos);
}

// Every turn is one forward: the prompts together, then the slots that sampled a token.
TEST(Engine, EachTurnIsOneForward) {
  FakeEngine f(3, {'a', 'b', 'c', 'd'});
  Got g[3];
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.e->submit(params({'x', 'y'}, 3 + i), g[i].sink()).ok());
  f.run();
  EXPECT_EQ(g[0].text, "cda");
  EXPECT_EQ(g[1].text, "cdab");
  EXPECT_EQ(g[2].text, "cdabc");
  // (tokens, sequences): the three prompts, three decoding slots twice, then two, then one.
  using C = std::pair<size_t, size_t>;
  EXPECT_EQ(f.runner.calls, (std::vector<C>{{6, 3}, {3, 3}, {3, 3}, {2, 2}, {1, 1}}));
  const EngineCounters c = f.e->counters();
  EXPECT_EQ(c.batches, 5u);
  EXPECT_EQ(c.batch_tokens, 15u);
  EXPECT_EQ(c.decode_steps, 4u);
  EXPECT_EQ(c.decode_rows, 9u);
}

// A prompt that arrives while another slot decodes is cut in chunks that share the decoding slot's
// turns (a fixed chunk here; by default sized from step times).
TEST(Engine, LongPromptsArePrefilledInChunksBesideDecodingSlots) {
  EngineOptions o;
  o.prefill_chunk = 3;
  FakeEngine f(2, {'a', 'b', 'c', 'd'}, o);
  Got shortp, longp;
  ASSERT_TRUE(f.e->submit(params({'x'}, 10), shortp.sink()).ok());
  f.e->step();  // short: prefill
  ASSERT_TRUE(f.e->submit(params(std::vector<int32_t>(8, 'z'), 2), longp.sink()).ok());
  f.e->step();  // short: token 1; long: chunk 1 (3 tokens), one batch
  f.e->step();  // short: token 2; long: chunk 2
  EXPECT_EQ(shortp.text, "bc");
  EXPECT_TRUE(longp.text.empty());
  using C = std::pair<size_t, size_t>;
  EXPECT_EQ(f.runner.calls, (std::vector<C>{{1, 1}, {4, 2}, {4, 2}}));
  f.run();
  ScriptSession* s_long = f.sessions[1];
  EXPECT_EQ(s_long->evals, 4);  // chunks of 3, 3, 2, then one decode token
  EXPECT_EQ(longp.text, "ab");  // positions 8, 9
  EXPECT_EQ(shortp.text, "bcdabcdabc");
}

TEST(Engine, EndOfGenerationAndStopStringsFinishWithStop) {
  FakeEngine f(1, {'a', 'b', 259, 'c'});
  Got eog;
  ASSERT_TRUE(f.e->submit(params({'z'}, 10), eog.sink()).ok());
  f.run();
  EXPECT_EQ(eog.text, "b");
  EXPECT_EQ(eog.last.finish, FinishReason::stop);
  Got ign;
  auto p = params({'z'}, 4);
  p.ignore_eos = true;
  ASSERT_TRUE(f.e->submit(p, ign.sink()).ok());
  f.run();
  EXPECT_EQ(ign.last.n_gen, 4);
  EXPECT_EQ(ign.last.finish, FinishReason::length);

  FakeEngine g(1, {'h', 'e', 'l', 'l', 'o', '!'});
  Got st;
  p = params({'h'}, 20);
  p.stop = {"lo!", "zz"};
  ASSERT_TRUE(g.e->submit(p, st.sink()).ok());
  g.run();
  EXPECT_EQ(st.text, "el");  // "ello!" minus the stop string
  EXPECT_EQ(st.last.finish, FinishReason::stop);
  EXPECT_EQ(st.last.n_gen, 5);
  Got held;  // a held-back partial match is released when the length limit ends the text
  p = params({'h'}, 3);
  p.stop = {"llx"};
  ASSERT_TRUE(g.e->submit(p, held.sink()).ok());
  g.run();
  EXPECT_EQ(held.text, "ell");
  EXPECT_EQ(held.last.finish, FinishReason::length);
}

TEST(Engine, ASinkThatSaysNoCancelsAndFreesTheSlot) {
  FakeEngine f(1, {'a', 'b'});
  Got c, next;
  c.cancel_after = 1;  // accept the first text event, refuse the second
  ASSERT_TRUE(f.e->submit(params({'q'}, 50), c.sink()).ok());
  ASSERT_TRUE(f.e->submit(params({'q'}, 2), next.sink()).ok());
  f.run();
  EXPECT_FALSE(c.done);  // a cancelled request gets no last event
  EXPECT_EQ(c.events.size(), 2u);
  EXPECT_EQ(next.text, "ba");
  EXPECT_EQ(f.e->counters().requests_cancelled, 1u);
  EXPECT_EQ(f.e->counters().requests_ok, 1u);
}

TEST(Engine, BadRequestsAreRefusedWithReasons) {
  EngineOptions o;
  o.max_queue = 1;
  FakeEngine f(1, {'a'}, o, 16);
  Got g;
  auto e1 = f.e->submit(params({}, 1), g.sink());
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.message().find("prompt is empty"), std::string::npos);
  auto e2 = f.e->submit(params(std::vector<int32_t>(16, 'a'), 1), g.sink());
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.message().find("prompt is 16 tokens but the context of a slot is 16"), std::string::npos)
      << e2.message();
  auto e3 = f.e->submit(params({'a', 9999}, 1), g.sink());
  ASSERT_FALSE(e3.ok());
  EXPECT_NE(e3.message().find("token id 9999 at prompt position 1"), std::string::npos) << e3.message();
  auto bad = params({'a'}, 1);
  bad.sampling.top_p = 0;
  EXPECT_FALSE(f.e->submit(bad, g.sink()).ok());
  Got q[3];
  EXPECT_TRUE(f.e->submit(params({'a'}, 1), q[0].sink()).ok());  // takes the free slot
  EXPECT_TRUE(f.e->submit(params({'a'}, 1), q[1].sink()).ok());  // the one queue place
  auto busy = f.e->submit(params({'a'}, 1), q[2].sink());
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.message().rfind("server busy", 0), 0u) << busy.message();
  EXPECT_EQ(f.e->counters().requests_rejected, 1u);
  f.run();
  EXPECT_TRUE(q[0].done && q[1].done);
}

TEST(Engine, ContextFullEndsWithLength) {
  FakeEngine f(1, {'a', 'b'}, {}, 6);
  Got g;
  ASSERT_TRUE(f.e->submit(params({'q', 'q', 'q'}, -1), g.sink()).ok());
  f.run();
  EXPECT_EQ(g.last.finish, FinishReason::length);
  EXPECT_EQ(g.last.n_gen, 4);  // positions 3..5 evaluated, the 4th sampled token ends it
}

TEST(Engine, ShutdownEndsUnfinishedRequestsWithAnError) {
  Got running, waiting;
  {
    FakeEngine f(1, {'a'});
    ASSERT_TRUE(f.e->submit(params({'q'}, 100), running.sink()).ok());
    ASSERT_TRUE(f.e->submit(params({'q'}, 100), waiting.sink()).ok());
    f.e->step();
  }
  ASSERT_TRUE(running.done && waiting.done);
  EXPECT_EQ(running.last.finish, FinishReason::error);
  EXPECT_EQ(waiting.last.error, "server shutting down");
}

// The bundled model behind the scheduler thread: three requests at once on two slots give, token
// for token, what generate() gives for each alone (greedy, and seeded sampling).
TEST(EngineModel, ConcurrentRequestsMatchOneAtATime) {
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
  sp[2].temp = 0;
  sp[2].repeat_penalty = 1.3f;
  std::vector<std::string> want(3);
  for (size_t i = 0; i < 3; ++i) {
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
  // The scheduler thread (chunked and whole prefill), then a manually stepped engine: there all
  // three requests are queued before the first turn, so the two slots must share decode turns
  // (the thread may, on a loaded machine, finish one request before the next is submitted).
  for (int run : {0, 1, 2}) {
    const int chunk = run == 1 ? 0 : 4;
    const bool manual = run == 2;
    SCOPED_TRACE("prefill chunk " + std::to_string(chunk) + (manual ? ", manual steps" : ""));
    EngineOptions eo;
    eo.n_slots = 2;
    eo.prefill_chunk = chunk;
    eo.manual_step = manual;
    auto e = Engine::for_model(model, {.n_ctx = 128}, eo);
    ASSERT_TRUE(e.ok()) << e.message();
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::string> got(3);
    int done = 0;
    for (size_t i = 0; i < 3; ++i) {
      CompletionParams p;
      p.prompt = tok.encode(prompts[i], true, true);
      p.n_predict = 20;
      p.sampling = sp[i];
      auto id = (*e)->submit(p, [&, i](const CompletionEvent& ev) {
        std::lock_guard<std::mutex> lk(mu);
        got[i] += ev.text;
        if (ev.done) {
          EXPECT_EQ(ev.finish, FinishReason::length) << ev.error;
          EXPECT_EQ(ev.n_gen, 20);
          ++done;
          cv.notify_all();
        }
        return true;
      });
      ASSERT_TRUE(id.ok()) << id.message();
    }
    if (manual) {
      for (int turn = 0; turn < 1000 && (*e)->step(); ++turn) {
      }
    }
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(120), [&] { return done == 3; }));
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got[i], want[i]) << "request " << i;
    EXPECT_GT((*e)->kv_bytes(), 0u);
    EXPECT_GT((*e)->ttft_percentile(0.5), 0.0);
    const EngineCounters c = (*e)->counters();
    if (manual) {
      EXPECT_LT(c.decode_steps, c.decode_rows);  // the two slots decoded in shared turns
    }
  }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Scoring through the engine (runtime/generate.h score: a prompt-only request with every row's
// logits): the rows equal one forward over the whole sequence, bit for bit, for every step size,
// and a prompt may fill the context when nothing is generated.
TEST(EngineModel, ScoringRowsEqualTheForwardForEveryChunk) {
  auto m = Model::load(testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  const Model& model = **m;
  const std::vector<int32_t> toks =
      model.tokenizer().encode("It is a truth universally acknowledged, that a single man", true, true);
  const int n = static_cast<int>(toks.size());
  const size_t V = static_cast<size_t>(model.n_vocab());
  auto ref_s = model.new_session({.n_ctx = n, .n_batch = 512});
  ASSERT_TRUE(ref_s.ok());
  std::vector<float> want(static_cast<size_t>(n) * V);
  ASSERT_TRUE((*ref_s)->eval(toks, want.data(), true).ok());
  for (int chunk : {1, 7, n}) {
    auto s = model.new_session({.n_ctx = n, .n_batch = 512});
    ASSERT_TRUE(s.ok());
    std::vector<float> got(want.size(), -1.0f);
    int calls = 0;
    const Status st = score(
        model, **s, static_cast<int32_t>(V), toks, chunk, [&](int64_t pos0, std::span<const float> rows) {
          std::copy(rows.begin(), rows.end(), got.begin() + pos0 * static_cast<int64_t>(V));
          ++calls;
          return true;
        });
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(calls, (n + chunk - 1) / chunk) << "chunk " << chunk;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * want.size()), 0) << "chunk " << chunk;
    EXPECT_EQ((*s)->n_past(), n);  // the whole context
  }
  // a caller that stops, and a sequence longer than the context
  auto s = model.new_session({.n_ctx = n, .n_batch = 512});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(score(model, **s, static_cast<int32_t>(V), toks, 2, [](int64_t, std::span<const float>) {
                 return false;
               }).ok());
  std::vector<int32_t> longer = toks;
  longer.push_back(toks[0]);
  const Status too_long = score(model, **s, static_cast<int32_t>(V), longer, 4,
                                [](int64_t, std::span<const float>) { return true; });
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("context"), std::string::npos) << too_long.message();
}

}  // namespace
}  // namespace strata
