// strata serve's HTTP face, end to end on the bundled smoke model: a server on a free port and a
// client. Non-streamed, streamed (SSE) and chat answers equal generate() for the same prompt;
// errors are JSON with the right status; /metrics and /health count what happened; a client that
// hangs up cancels its request.
#include "server/http_server.h"

#include <gtest/gtest.h>

#include "server/http_fixture.h"

namespace strata::server {
namespace {

using nlohmann::json;
using testing::HttpServerTest;
using testing::sse_text;

TEST_F(HttpServerTest, CompletionsStreamedOrNotEqualGenerate) {
  start();
  const std::string want = reference("In the beginning", 12);
  auto c = client();
  auto r = c.Post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 12, "temperature": 0})",
                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json b = json::parse(r->body);
  EXPECT_EQ(b["choices"][0]["text"], want);
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b["usage"]["completion_tokens"], 12);
  EXPECT_EQ(b["model"], "smoke");
  r = c.Post("/v1/completions",
             R"({"prompt": "In the beginning", "max_tokens": 12, "temperature": 0, "stream": true,
                 "stream_options": {"include_usage": true}})",
             "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::string finish;
  EXPECT_EQ(sse_text(r->body, false, &finish), want);
  EXPECT_EQ(finish, "length");
  EXPECT_NE(r->body.find("\"usage\":{\"completion_tokens\":12"), std::string::npos) << r->body;
}

TEST_F(HttpServerTest, ChatUsesTheTemplate) {
  start();
  auto chat = chat_apply(ChatFormat::chatml, std::vector<ChatMessage>{{"user", "Hello"}}, true);
  ASSERT_TRUE(chat.ok());
  const std::string want = reference(*chat, 8);
  auto c = client();
  const std::string body = R"({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8,
                               "temperature": 0)";
  auto r = c.Post("/v1/chat/completions", body + "}", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json b = json::parse(r->body);
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_EQ(b["choices"][0]["message"]["content"], want);
  r = c.Post("/v1/chat/completions", body + R"(, "stream": true})", "application/json");
  ASSERT_TRUE(r);
  std::string finish;
  EXPECT_EQ(sse_text(r->body, true, &finish), want);
  r = c.Post("/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "x"}]})",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("wizard"), std::string::npos) << r->body;
}

TEST_F(HttpServerTest, ErrorsAreJsonWithStatus) {
  ServerOptions so;
  so.max_body_bytes = 4096;
  start(so);
  auto c = client();
  auto expect_error = [&](const httplib::Result& r, int status, const std::string& needle) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    json b = json::parse(r->body, nullptr, false);
    ASSERT_FALSE(b.is_discarded()) << r->body;
    EXPECT_NE(b["error"]["message"].get<std::string>().find(needle), std::string::npos) << r->body;
  };
  expect_error(c.Post("/v1/completions", "{oops", "application/json"), 400, "not valid JSON");
  expect_error(c.Post("/v1/completions", R"({"prompt": "x", "n": 17})", "application/json"), 400,
               "'n' is 17");
  std::string longp(300, 'a');
  for (size_t i = 0; i < longp.size(); ++i) longp[i] = i % 2 ? ' ' : 'a';
  expect_error(c.Post("/v1/completions", json{{"prompt", longp}}.dump(), "application/json"), 400,
               "context of a slot is 96");
  expect_error(c.Post("/v1/completions", json{{"prompt", std::string(5000, 'a')}}.dump(), "application/json"),
               413, "larger than the server's limit");
  expect_error(c.Get("/v2/nothing"), 404, "no route for GET /v2/nothing");
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(m->body)["data"][0]["id"], "smoke");
}

TEST_F(HttpServerTest, ApiKeyIsRequiredWhenSet) {
  ServerOptions so;
  so.api_key = "sekret";
  start(so);
  auto c = client();
  auto r = c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 1})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  httplib::Headers hd{{"Authorization", "Bearer sekret"}};
  r = c.Post("/v1/completions", hd, R"({"prompt": "x", "max_tokens": 1})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(c.Get("/health")->status, 200);  // health needs no key
}

TEST_F(HttpServerTest, MetricsCountRequestsAndAHangUpCancels) {
  start({}, {}, /*eval_delay_ms=*/10);  // 90 tokens take > 900 ms: the hang-up comes first
  auto c = client();
  auto r = c.Post("/v1/completions", R"({"prompt": "The", "max_tokens": 5, "temperature": 0})",
                  "application/json");
  ASSERT_TRUE(r);
  // A streaming client that hangs up after its first chunk: the request is cancelled.
  httplib::Client hang("127.0.0.1", port_);
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt": "The", "max_tokens": 90, "temperature": 0, "ignore_eos": true, "stream": true})";
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };
  hang.send(req);
  for (int i = 0; i < 400 && engine_->counters().requests_cancelled == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine_->counters().requests_cancelled, 1u);
  auto met = c.Get("/metrics");
  ASSERT_TRUE(met);
  EXPECT_NE(met->body.find("strata_requests_success_total 1\n"), std::string::npos) << met->body;
  EXPECT_NE(met->body.find("strata_requests_cancelled_total 1\n"), std::string::npos) << met->body;
  EXPECT_NE(met->body.find("strata_time_to_first_token_seconds_count 2\n"), std::string::npos) << met->body;
  EXPECT_NE(met->body.find("# TYPE strata_time_per_output_token_seconds histogram"), std::string::npos);
}

}  // namespace
}  // namespace strata::server
