// logprobs, top_logprobs and echo end to end on the bundled model: OpenAI's shapes for completions
// and chat, streamed and not; an echoed prompt's logprobs (max_tokens 0: prompt scoring) equal
// log_softmax of the scored rows within 1e-5; limits (and penalties', logit_bias's) are 400s
// naming the field.
#include <gtest/gtest.h>

#include <cmath>

#include "server/http_fixture.h"

namespace strata::server {
namespace {

using nlohmann::json;
using testing::HttpServerTest;

json post(httplib::Client& c, const char* path, const json& body, int want_status = 200) {
  auto r = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, want_status) << r->body;
  return want_status == 200 && body.value("stream", false) ? json(r->body) : json::parse(r->body);
}

// The SSE body's chunks (up to [DONE]).
std::vector<json> sse_chunks(const std::string& body) {
  std::vector<json> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string payload = body.substr(at + 6, end - at - 6);
    at = end;
    if (payload == "[DONE]") break;
    out.push_back(json::parse(payload));
  }
  return out;
}

TEST_F(HttpServerTest, CompletionLogprobsStreamedOrNot) {
  start();
  auto c = client();
  const json req{{"prompt", "In the beginning"}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 3}};
  json b = post(c, "/v1/completions", req);
  const json& lp = b["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u) << b.dump();
  std::string joined;
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(lp["text_offset"][i], joined.size());
    joined += lp["tokens"][i].get<std::string>();
    ASSERT_EQ(lp["top_logprobs"][i].size(), 3u);
    // greedy: the chosen token is the likeliest one
    double best = -1e30;
    for (auto& [piece, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
    EXPECT_DOUBLE_EQ(lp["token_logprobs"][i].get<double>(), best);
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
  }
  EXPECT_EQ(joined, b["choices"][0]["text"]);
  json sreq = req;
  sreq["stream"] = true;
  auto r = c.Post("/v1/completions", sreq.dump(), "application/json");
  ASSERT_TRUE(r);
  std::vector<double> streamed;
  for (const json& ch : sse_chunks(r->body)) {
    const json& l = ch["choices"][0]["logprobs"];
    if (l.is_null()) continue;
    for (auto& v : l["token_logprobs"]) streamed.push_back(v.get<double>());
  }
  ASSERT_EQ(streamed.size(), 6u) << r->body;
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(streamed[i], lp["token_logprobs"][i].get<double>());
  // without logprobs: null
  EXPECT_TRUE(post(c, "/v1/completions", json{{"prompt", "x"}, {"max_tokens", 1}})["choices"][0]["logprobs"]
                  .is_null());
}

TEST_F(HttpServerTest, EchoWithMaxTokensZeroScoresThePrompt) {
  start();
  auto c = client();
  const std::string prompt = "It is a truth universally acknowledged";
  const std::vector<int32_t> toks = model_->tokenizer().encode(prompt, true, true);
  json b = post(c, "/v1/completions",
                json{{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}});
  EXPECT_EQ(b["choices"][0]["text"], prompt);
  const json& lp = b["choices"][0]["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), toks.size()) << b.dump();
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  // the reference: the prompt scored alone, log_softmax per row
  const size_t V = static_cast<size_t>(model_->n_vocab());
  std::vector<float> rows(toks.size() * V);
  auto s = model_->new_session({.n_ctx = 96});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(score(*model_, **s, model_->n_vocab(), toks, 5, [&](int64_t pos0, std::span<const float> r) {
                std::copy(r.begin(), r.end(), rows.begin() + pos0 * static_cast<int64_t>(V));
                return true;
              }).ok());
  for (size_t i = 1; i < toks.size(); ++i) {
    const float* row = rows.data() + (i - 1) * V;
    long double mx = row[0], sum = 0;
    for (size_t k = 0; k < V; ++k) mx = std::max<long double>(mx, row[k]);
    for (size_t k = 0; k < V; ++k) sum += std::exp(static_cast<long double>(row[k]) - mx);
    const double want = static_cast<double>(row[toks[i]] - mx - std::log(sum));
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), want, 1e-5) << "position " << i;
    EXPECT_EQ(lp["top_logprobs"][i].size(), 1u);
  }
  EXPECT_EQ(b["usage"]["completion_tokens"], 0);
  // text offsets index the echoed text (a BOS adds nothing to it)
  for (size_t i = 1; i < toks.size(); ++i) {
    const std::string piece = model_->tokenizer().token_to_piece(toks[i]);
    EXPECT_EQ(prompt.substr(lp["text_offset"][i].get<size_t>(), piece.size()), piece) << "position " << i;
  }
  // echo without logprobs, generating: the prompt's text then the completion's
  json e = post(c, "/v1/completions",
                json{{"prompt", prompt}, {"max_tokens", 4}, {"echo", true}, {"temperature", 0}});
  json plain = post(c, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(e["choices"][0]["text"], prompt + plain["choices"][0]["text"].get<std::string>());
  EXPECT_TRUE(e["choices"][0]["logprobs"].is_null());
  // streamed: the first chunk carries the prompt
  auto r = c.Post("/v1/completions",
                  json{{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"stream", true}}.dump(),
                  "application/json");
  ASSERT_TRUE(r);
  std::vector<json> chunks = sse_chunks(r->body);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks[0]["choices"][0]["text"], prompt);
}

TEST_F(HttpServerTest, ChatLogprobsHaveTheChatShape) {
  start();
  auto c = client();
  const json msgs = json::array({json{{"role", "user"}, {"content", "Hello"}}});
  json b = post(c, "/v1/chat/completions",
                json{{"messages", msgs},
                     {"max_tokens", 5},
                     {"temperature", 0},
                     {"logprobs", true},
                     {"top_logprobs", 2}});
  const json& content = b["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u) << b.dump();
  std::string joined;
  for (const json& t : content) {
    joined += t["token"].get<std::string>();
    ASSERT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);  // greedy
    EXPECT_EQ(t["top_logprobs"][0]["logprob"], t["logprob"]);
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
    EXPECT_EQ(t["bytes"].size(), t["token"].get<std::string>().size());
  }
  EXPECT_EQ(joined, b["choices"][0]["message"]["content"]);
  json no_top = post(c, "/v1/chat/completions",
                     json{{"messages", msgs}, {"max_tokens", 2}, {"logprobs", true}, {"stream", true}});
  size_t n = 0;
  for (const json& ch : sse_chunks(no_top.get<std::string>())) {
    const json& l = ch["choices"][0]["logprobs"];
    if (l.is_null()) continue;
    for (const json& t : l["content"]) {
      EXPECT_TRUE(t["top_logprobs"].empty());
      ++n;
    }
  }
  EXPECT_EQ(n, 2u);
}

TEST_F(HttpServerTest, NewFieldsOutOfRangeAre400sNamingTheField) {
  start();
  auto c = client();
  auto expect_400 = [&](const char* path, const json& body, const std::string& needle) {
    json e = post(c, path, body, 400);
    EXPECT_NE(e["error"]["message"].get<std::string>().find(needle), std::string::npos) << e.dump();
  };
  const json msgs = json::array({json{{"role", "user"}, {"content", "Hi"}}});
  expect_400("/v1/completions", json{{"prompt", "x"}, {"logprobs", 6}}, "'logprobs' is 6");
  expect_400("/v1/completions", json{{"prompt", "x"}, {"logprobs", true}}, "'logprobs' must be an integer");
  expect_400("/v1/chat/completions", json{{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 21}},
             "'top_logprobs' is 21");
  expect_400("/v1/chat/completions", json{{"messages", msgs}, {"top_logprobs", 2}}, "'top_logprobs' needs");
  expect_400("/v1/chat/completions", json{{"messages", msgs}, {"logprobs", 3}},
             "'logprobs' must be true or false");
  expect_400("/v1/chat/completions", json{{"messages", msgs}, {"echo", true}}, "'echo'");
  expect_400("/v1/completions", json{{"prompt", "x"}, {"presence_penalty", 3}}, "'presence_penalty' is 3");
  expect_400("/v1/completions",
             json{{"prompt", "x"}, {"logit_bias", {{std::to_string(model_->n_vocab()), 1}}}},
             "logit_bias: token id " + std::to_string(model_->n_vocab()) + " is outside the vocabulary");
}

}  // namespace
}  // namespace strata::server
