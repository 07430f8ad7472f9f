// The load generator: percentile arithmetic, deterministic prompts, and a run against a server on
// the bundled smoke model whose token counts must add up exactly.
#include "server/load_test.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "common/fixtures.h"
#include "server/http_server.h"

namespace strata::server {
namespace {

TEST(LoadTest, NearestRankSummary) {
  std::vector<double> v;
  for (int i = 1; i <= 200; ++i) v.push_back(i);
  LatencySummary s = summarize_latency(v);
  EXPECT_EQ(s.n, 200);
  EXPECT_EQ(s.p50, 100);
  EXPECT_EQ(s.p95, 190);
  EXPECT_EQ(s.p99, 198);
  EXPECT_EQ(s.max, 200);
  EXPECT_DOUBLE_EQ(s.mean, 100.5);
  EXPECT_EQ(summarize_latency({}).n, 0);
}

TEST(LoadTest, PromptsAreDeterministicWords) {
  const std::string a = load_prompt(50, 7), b = load_prompt(50, 7), c = load_prompt(50, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::istringstream is(a);
  int words = 0;
  for (std::string w; is >> w;) ++words;
  EXPECT_EQ(words, 50);
}

TEST(LoadTest, RunAgainstAServerCountsEveryToken) {
  auto m = Model::load(strata::testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  EngineOptions eo;
  eo.n_slots = 2;
  auto e = Engine::create(
      **m, [&](int n_batch) { return (*m)->new_session({.n_ctx = 160, .n_batch = n_batch}); },
      &(*m)->tokenizer(), (*m)->n_vocab(), eo);
  ASSERT_TRUE(e.ok()) << e.message();
  ServerOptions so;
  so.port = 0;
  HttpServer http(**e, (*m)->tokenizer(), std::nullopt, so);
  auto port = http.bind();
  ASSERT_TRUE(port.ok()) << port.message();
  std::thread t([&] { http.run(); });
  LoadTestOptions o;
  o.port = *port;
  o.concurrency = 3;
  o.requests = 6;
  o.max_tokens = 5;
  o.classes = {{"short", 4}, {"long", 40}};
  o.keep_texts = true;
  auto rep = run_load_test(o);
  const EngineCounters first = (*e)->counters();  // the engine's numbers for the report's requests
  o.requests = 2;  // the same first two requests again: the same texts (greedy)
  auto again = run_load_test(o);
  http.stop();
  t.join();
  ASSERT_TRUE(rep.ok()) << rep.message();
  ASSERT_EQ(rep->classes.size(), 3u);
  const ClassReport& all = rep->classes.back();
  EXPECT_EQ(all.name, "all");
  EXPECT_EQ(all.requests, 6);
  EXPECT_EQ(all.failed, 0) << (rep->errors.empty() ? "" : rep->errors[0]);
  EXPECT_EQ(all.gen_tokens, 30);  // ignore_eos: every request generates max_tokens
  EXPECT_EQ(first.gen_tokens, 30u);
  EXPECT_EQ(rep->classes[0].requests, 3);
  EXPECT_LT(rep->classes[0].prompt_tokens, rep->classes[1].prompt_tokens);
  EXPECT_EQ(all.prompt_tokens, static_cast<int64_t>(first.prompt_tokens));
  EXPECT_EQ(all.ttft.n, 6);
  EXPECT_LE(all.ttft.max, all.latency.max);
  EXPECT_GT(rep->gen_tok_s(), 0);
  EXPECT_NE(load_report_text(*rep).find("all"), std::string::npos);
  EXPECT_EQ(load_report_json(*rep)["classes"][2]["gen_tokens"], 30);
  // strata's own numbers, polled from /v1/strata/stats (this engine keeps contiguous KV).
  EXPECT_TRUE(rep->server.seen);
  EXPECT_FALSE(rep->server.paged);
  EXPECT_GE(rep->server.polls, 1);
  EXPECT_LE(rep->server.max_running, 2);
  EXPECT_EQ(load_report_json(*rep)["server_stats"]["paged_kv"], false);
  ASSERT_EQ(rep->texts.size(), 6u);
  for (const std::string& text : rep->texts) EXPECT_FALSE(text.empty());
  ASSERT_TRUE(again.ok()) << again.message();
  ASSERT_EQ(again->texts.size(), 2u);
  EXPECT_EQ(again->texts[0], rep->texts[0]);
  EXPECT_EQ(again->texts[1], rep->texts[1]);
}

TEST(LoadTest, UnreachableServerAndBadOptionsAreErrors) {
  LoadTestOptions o;
  o.port = 1;  // nothing listens there
  auto r = run_load_test(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("cannot reach http://127.0.0.1:1"), std::string::npos) << r.message();
  o.concurrency = 0;
  EXPECT_NE(run_load_test(o).message().find("--concurrency 0"), std::string::npos);
}

}  // namespace
}  // namespace strata::server
