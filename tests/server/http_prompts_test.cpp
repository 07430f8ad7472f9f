// Several prompts in one completions request (a choice each, streamed or not, each equal to its
// prompt alone; one the queue cannot take refuses the request and cancels the others), and the
// developer role written as the system role.
#include <gtest/gtest.h>

#include <map>

#include "server/http_fixture.h"

namespace strata::server {
namespace {

using nlohmann::json;
using testing::HttpServerTest;
using testing::wait_for;

TEST_F(HttpServerTest, PromptArraysGiveAChoiceEach) {
  start();
  const std::vector<std::string> prompts = {"In the beginning", "The", "It is a truth"};
  std::vector<std::string> want;
  for (const std::string& p : prompts) want.push_back(reference(p, 6));
  auto c = client();
  const json req{{"prompt", prompts}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 1}};
  auto r = c.Post("/v1/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json b = json::parse(r->body);
  ASSERT_EQ(b["choices"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(b["choices"][i]["index"], i);
    EXPECT_EQ(b["choices"][i]["text"], want[i]) << i;
    EXPECT_EQ(b["choices"][i]["logprobs"]["tokens"].size(), 6u);
  }
  EXPECT_EQ(b["usage"]["completion_tokens"], 18);
  json sreq = req;
  sreq["stream"] = true;
  sreq["stream_options"] = {{"include_usage", true}};
  r = c.Post("/v1/completions", sreq.dump(), "application/json");
  ASSERT_TRUE(r);
  std::map<int, std::string> text;
  std::map<int, std::string> finish;
  int usage_chunks = 0;
  bool done = false;
  size_t at = 0;
  while ((at = r->body.find("data: ", at)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", at);
    const std::string payload = r->body.substr(at + 6, end - at - 6);
    at = end;
    if (payload == "[DONE]") {
      done = true;
      break;
    }
    json j = json::parse(payload);
    if (j["choices"].empty()) {
      EXPECT_EQ(j["usage"]["completion_tokens"], 18);
      ++usage_chunks;
      continue;
    }
    const json& ch = j["choices"][0];
    const int i = ch["index"].get<int>();
    text[i] += ch["text"].get<std::string>();
    if (!ch["finish_reason"].is_null()) finish[i] = ch["finish_reason"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(usage_chunks, 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(text[i], want[static_cast<size_t>(i)]) << i;
    EXPECT_EQ(finish[i], "length");
  }
  // token-id prompts, several
  const std::vector<int32_t> ids = model_->tokenizer().encode(prompts[0], true, true);
  json t = json::parse(c.Post("/v1/completions",
                              json{{"prompt", {ids, ids}}, {"max_tokens", 6}, {"temperature", 0}}.dump(),
                              "application/json")
                           ->body);
  ASSERT_EQ(t["choices"].size(), 2u) << t.dump();
  EXPECT_EQ(t["choices"][1]["text"], want[0]);
  // one bad prompt refuses the request and names it
  std::string longp;
  for (int i = 0; i < 150; ++i) longp += "a ";
  r = c.Post("/v1/completions", json{{"prompt", {"x", longp}}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("prompt 1: prompt is"), std::string::npos) << r->body;
}

TEST_F(HttpServerTest, APromptArrayBeyondTheQueueIs503AndCancelsItsOtherChoices) {
  EngineOptions eo;
  eo.max_queue = 0;  // two slots, no waiting: the third prompt cannot be taken
  start({}, eo, /*eval_delay_ms=*/20);
  auto c = client();
  json req{{"prompt", {"The", "It", "In"}}, {"max_tokens", 60}, {"ignore_eos", true}};
  for (bool stream : {false, true}) {
    req["stream"] = stream;
    const uint64_t cancelled = engine_->counters().requests_cancelled;
    auto r = c.Post("/v1/completions", req.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_NE(r->body.find("prompt 2: server busy"), std::string::npos) << r->body;
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    // The two choices already queued are cancelled at their next event, not run to 60 tokens.
    EXPECT_TRUE(wait_for([&] { return engine_->counters().requests_cancelled == cancelled + 2; }, 3000));
    EXPECT_TRUE(wait_for([&] { return engine_->counters().running == 0; }, 3000));
  }
}

TEST_F(HttpServerTest, DeveloperRoleIsTheSystemRole) {
  start();
  auto chat = chat_apply(ChatFormat::chatml,
                         std::vector<ChatMessage>{{"system", "Be brief."}, {"user", "Hello"}}, true);
  ASSERT_TRUE(chat.ok());
  const std::string want = reference(*chat, 8);
  auto c = client();
  json body{{"messages",
             {{{"role", "developer"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hello"}}}},
            {"max_tokens", 8},
            {"temperature", 0}};
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], want);
}

}  // namespace
}  // namespace strata::server
