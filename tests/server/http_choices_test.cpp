// n > 1 end to end on the bundled model: choice j of a seeded request equals the n = 1 request with
// seed + j (completions and chat, streamed and not), usage counts the prompt once, a bad n is a 400
// naming it; tool_choice auto through the lazy grammar answers (content or calls), with a history
// of calls and results, streamed reassembling to the non-streamed answer; a named function under
// its grammar is a call of it (streamed too), a tool whose parameters cannot be a grammar a 400.
#include <gtest/gtest.h>

#include <map>

#include "server/http_fixture.h"

namespace strata::server {
namespace {

using nlohmann::json;
using testing::HttpServerTest;

json post(httplib::Client& c, const std::string& path, const json& req, int status = 200) {
  auto r = c.Post(path, req.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, status) << r->body;
  return r->body.empty() || req.value("stream", false) ? json(r->body) : json::parse(r->body);
}

// Each choice's text (completions' text or chat's delta.content) from an SSE body, by index.
std::map<int, std::string> sse_choices(const std::string& body, bool chat) {
  std::map<int, std::string> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string payload = body.substr(at + 6, end - at - 6);
    at = end;
    if (payload == "[DONE]") break;
    const json j = json::parse(payload);
    if (j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    std::string& s = out[c["index"].get<int>()];
    if (!chat) s += c["text"].get<std::string>();
    if (chat && c["delta"].contains("content")) s += c["delta"]["content"].get<std::string>();
  }
  return out;
}

std::string text_of(const json& choice, bool chat) {
  return chat ? choice["message"]["content"].get<std::string>() : choice["text"].get<std::string>();
}

TEST_F(HttpServerTest, NChoicesEqualTheirSeededTwins) {
  start();
  auto c = client();
  for (bool chat : {false, true}) {
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    json req{{"max_tokens", 8}, {"temperature", 1.0}, {"seed", 41}};
    if (chat) {
      req["messages"] = {{{"role", "user"}, {"content", "Tell me"}}};
    } else {
      req["prompt"] = "In the beginning";
    }
    std::vector<std::string> twins;
    int prompt_tokens = 0;
    for (int j = 0; j < 3; ++j) {
      json one = req;
      one["seed"] = 41 + j;
      const json b = post(c, path, one);
      twins.push_back(text_of(b["choices"][0], chat));
      prompt_tokens = b["usage"]["prompt_tokens"];
    }
    json n3 = req;
    n3["n"] = 3;
    const json b = post(c, path, n3);
    ASSERT_EQ(b["choices"].size(), 3u) << b;
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(b["choices"][j]["index"], j);
      EXPECT_EQ(text_of(b["choices"][j], chat), twins[static_cast<size_t>(j)]) << chat << " choice " << j;
    }
    EXPECT_EQ(b["usage"]["prompt_tokens"], prompt_tokens);  // one prompt, counted once
    n3["stream"] = true;
    const std::map<int, std::string> streamed = sse_choices(post(c, path, n3).get<std::string>(), chat);
    ASSERT_EQ(streamed.size(), 3u);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(streamed.at(j), twins[static_cast<size_t>(j)]) << chat << " " << j;
  }
  // Prompt arrays: choice i * n + j is prompt i's j-th.
  const json b =
      post(c, "/v1/completions",
           json{{"prompt", {"In the beginning", "The"}}, {"n", 2}, {"max_tokens", 4}, {"temperature", 0}});
  ASSERT_EQ(b["choices"].size(), 4u);
  EXPECT_EQ(b["choices"][1]["text"], b["choices"][0]["text"]);  // greedy: the same
  EXPECT_EQ(b["choices"][3]["text"], b["choices"][2]["text"]);
  EXPECT_EQ(b["choices"][0]["text"], reference("In the beginning", 4));
  EXPECT_EQ(b["choices"][2]["text"], reference("The", 4));
}

TEST_F(HttpServerTest, BadNIsA400NamingIt) {
  start();
  auto c = client();
  for (int n : {0, -1, 17}) {
    const json b = post(c, "/v1/completions", json{{"prompt", "x"}, {"n", n}}, 400);
    EXPECT_EQ(b["error"]["message"], "'n' is " + std::to_string(n) + "; it must be in [1, 16]");
  }
  const json b = post(c, "/v1/chat/completions",
                      json{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"n", "2"}}, 400);
  EXPECT_EQ(b["error"]["message"], "'n' must be an integer, got string");
}

TEST_F(HttpServerTest, ToolChoiceAutoAnswersContentOrCalls) {
  n_ctx_ = 512;  // the tools' description is ~400 tokens
  start();
  auto c = client();
  json req{{"messages", json::parse(R"([{"role": "user", "content": "weather in Oslo?"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "a", "content": "12C"}])")},
           {"tools", json::parse(R"([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])")},
           {"max_tokens", 12},
           {"temperature", 0}};
  const json b = post(c, "/v1/chat/completions", req);
  const json& ch = b["choices"][0];
  const std::string finish = ch["finish_reason"];
  EXPECT_TRUE(finish == "stop" || finish == "length" || finish == "tool_calls") << b;
  if (finish == "tool_calls") {
    EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  } else {
    ASSERT_TRUE(ch["message"]["content"].is_string()) << b;
    req["stream"] = true;
    const std::map<int, std::string> s =
        sse_choices(post(c, "/v1/chat/completions", req).get<std::string>(), true);
    EXPECT_EQ(s.at(0), ch["message"]["content"]);
  }
  req["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{oops";
  req.erase("stream");
  const json bad = post(c, "/v1/chat/completions", req, 400);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("messages[1].tool_calls: arguments {oops"),
            std::string::npos)
      << bad;
}

// tool_choice naming a function: the whole reply is grammar-constrained to one call of it in the
// chat format's syntax (Hermes for chatml, Llama 3 JSON, Mistral v7, gpt-oss harmony, DSML), so even
// the untrained bundled model answers with that call, parsed back.
TEST_F(HttpServerTest, NamedToolChoiceAnswersItsCall) {
  n_ctx_ = 1024;  // Llama 3's tools prompt is ~500 tokens; a DSML call ~70 of the bundled model's
  json req{{"messages", {{{"role", "user"}, {"content", "what time is it?"}}}},
           {"tools", json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters":
              {"type": "object", "properties": {"city": {"type": "string"}}}}},
              {"type": "function", "function": {"name": "now", "parameters": {"type": "object",
              "properties": {}, "additionalProperties": false}}}])")},
           {"tool_choice", {{"type", "function"}, {"function", {{"name", "now"}}}}},
           {"parallel_tool_calls", false},
           {"max_tokens", 200},
           {"temperature", 0}};
  for (ChatFormat f : {ChatFormat::chatml, ChatFormat::llama3, ChatFormat::mistral_v7, ChatFormat::gpt_oss,
                       ChatFormat::deepseek4}) {
    SCOPED_TRACE(chat_format_name(f));
    chat_format_ = f;
    start();
    auto c = client();
    const json b = post(c, "/v1/chat/completions", req);
    const json& ch = b["choices"][0];
    EXPECT_EQ(ch["finish_reason"], "tool_calls") << b;
    ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u) << b;
    EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "now");
    EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["arguments"], "{}");
    json s = req;
    s["stream"] = true;
    const std::string sse = post(c, "/v1/chat/completions", s).get<std::string>();
    EXPECT_NE(sse.find(R"("name":"now")"), std::string::npos) << sse;
    EXPECT_NE(sse.find(R"("finish_reason":"tool_calls")"), std::string::npos) << sse;
    TearDown();
  }
  start();  // deepseek4's DSML: a bad schema is refused as in the JSON syntaxes
  auto c = client();
  req["tools"][1]["function"]["parameters"] = json{{"type", "object"}, {"multipleOf", 2}};
  const json bad = post(c, "/v1/chat/completions", req, 400);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("'tools': tool 'now' parameters:"),
            std::string::npos)
      << bad;
}

}  // namespace
}  // namespace strata::server
