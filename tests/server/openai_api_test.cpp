// OpenAI request parsing (fields, defaults, errors that name the field) and response bodies.
#include "server/openai_api.h"

#include <gtest/gtest.h>

#include <tuple>

namespace strata::server {
namespace {

using nlohmann::json;

std::string parse_error(const std::string& body, bool chat = false) {
  auto r = parse_request(body, chat);
  return r.ok() ? "" : r.message();
}

TEST(OpenAiRequest, CompletionFields) {
  auto r = parse_request(R"({"model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
                             "top_k": 5, "min_p": 0.1, "seed": 42, "stop": ["a", "b"], "stream": true,
                             "stream_options": {"include_usage": true}, "repeat_penalty": 1.1, "n": 1,
                             "presence_penalty": 0, "logprobs": null, "ignore_eos": true})",
                         false);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->prompts.size(), 1u);
  EXPECT_EQ(r->prompts[0].text, "hi");
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->params.n_predict, 7);
  EXPECT_FLOAT_EQ(r->params.sampling.temp, 0.5f);
  EXPECT_FLOAT_EQ(r->params.sampling.top_p, 0.9f);
  EXPECT_EQ(r->params.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(r->params.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r->params.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(r->params.sampling.seed, 42u);
  EXPECT_EQ(r->params.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_TRUE(r->params.ignore_eos);
  auto d = parse_request(R"({"prompt": [1, 2, 3], "stop": "x"})", false);
  ASSERT_TRUE(d.ok()) << d.message();
  ASSERT_EQ(d->prompts.size(), 1u);
  EXPECT_EQ(d->prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(d->params.n_predict, -1);  // no max_tokens: until end of text or a full context
  EXPECT_EQ(d->params.sampling.seed, kSamplerRandomSeed);
  EXPECT_FALSE(d->stream);
  EXPECT_EQ(d->params.stop, std::vector<std::string>{"x"});
  auto one = parse_request(R"({"prompt": ["only one"]})", false);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->prompts.size(), 1u);
  EXPECT_EQ(one->prompts[0].text, "only one");
  auto several = parse_request(R"({"prompt": ["a", [5, 6], "c"]})", false);
  ASSERT_TRUE(several.ok()) << several.message();
  ASSERT_EQ(several->prompts.size(), 3u);
  EXPECT_EQ(several->prompts[1].tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(several->prompts[2].text, "c");
}

TEST(OpenAiRequest, ChatMessages) {
  auto r = parse_request(R"({"messages": [{"role": "system", "content": "be brief"},
                                          {"role": "user", "content": [{"type": "text", "text": "a"},
                                                                       {"type": "text", "text": "b"}]}],
                             "max_completion_tokens": 3})",
                         true);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "ab");
  EXPECT_EQ(r->params.n_predict, 3);
}

TEST(OpenAiRequest, ChatThinkingAndReasoning) {
  auto r = parse_request(R"({"messages": [{"role": "user", "content": "q"},
                                          {"role": "assistant", "content": "a", "reasoning_content": "r"}],
                             "chat_template_kwargs": {"enable_thinking": true}})",
                         true);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->thinking);
  EXPECT_EQ(r->messages[1].reasoning_content, "r");
  auto off = parse_request(R"({"messages": [{"role": "user", "content": "q"}]})", true);
  ASSERT_TRUE(off.ok()) << off.message();
  EXPECT_FALSE(off->thinking);
  auto bad =
      parse_request(R"({"messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": 3})", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("chat_template_kwargs"), std::string::npos) << bad.message();
  bad =
      parse_request(R"({"messages": [{"role": "assistant", "content": "a", "reasoning_content": 1}]})", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("messages[0].reasoning_content"), std::string::npos) << bad.message();
}

TEST(OpenAiRequest, ErrorsNameTheField) {
  EXPECT_EQ(parse_error("{nope"), "request body is not valid JSON");
  EXPECT_NE(parse_error("[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_EQ(parse_error("{}"), "'prompt' is required");
  EXPECT_NE(parse_error(R"({"prompt": 5})").find("'prompt' must be a string"), std::string::npos);
  EXPECT_NE(parse_error(R"({"prompt": []})").find("'prompt' is empty"), std::string::npos);
  EXPECT_NE(parse_error(R"({"prompt": ["a", 3]})").find("'prompt'[1] must be a string or an array"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prompt": ["a", []]})").find("'prompt'[1] is empty"), std::string::npos);
  EXPECT_NE(parse_error(R"({"prompt": [[1, "x"]]})").find("'prompt'[0][1] must be a token id"),
            std::string::npos);
  EXPECT_NE(parse_error(json{{"prompt", std::vector<std::string>(65, "a")}}.dump()).find("at most 64"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prompt": [1, -2]})").find("'prompt'[1] = -2"), std::string::npos);
  EXPECT_NE(parse_error(R"({"prompt": "x", "max_tokens": "7"})").find("'max_tokens' must be an integer"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prompt": "x", "temperature": -1})").find("'temperature' is -1"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prompt": "x", "top_p": 0})").find("'top_p'"), std::string::npos);
  EXPECT_EQ(parse_error(R"({"prompt": "x", "n": 2})"), "");
  EXPECT_EQ(parse_error(R"({"prompt": "x", "n": 0})"), "'n' is 0; it must be in [1, 16]");
  EXPECT_EQ(parse_error(R"({"prompt": "x", "n": 17})"), "'n' is 17; it must be in [1, 16]");
  EXPECT_EQ(parse_error(R"({"prompt": "x", "n": 1.5})"), "'n' must be an integer, got number");
  EXPECT_EQ(parse_error(R"({"prompt": ["a", "b", "c", "d", "e"], "n": 16})"),
            "'n' is 16 with 5 prompts: 80 choices, at most 64 in one request");
  EXPECT_NE(parse_error(R"({"prompt": "x", "stream": "yes"})").find("'stream' must be true or false"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prompt": "x", "stop": [1]})").find("'stop'[0] must be a string"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prompt": "x", "best_of": 3})").find("is not supported by strata serve"),
            std::string::npos);
  // suffix: fill-in-the-middle (the model's FIM tokens are checked when the prompt is built);
  // chat has none.
  EXPECT_EQ(parse_error(R"({"prompt": "x", "suffix": "y"})"), "");
  EXPECT_EQ(parse_error(R"({"prompt": "x", "suffix": 1})"), "'suffix' must be a string, got number");
  EXPECT_NE(parse_error(R"({"messages": [{"role": "user", "content": "x"}], "suffix": "y"})", true)
                .find("'suffix' is not supported by strata serve"),
            std::string::npos);
  EXPECT_EQ(parse_error(R"({"prompt": "x", "best_of": 1})"), "");
  EXPECT_NE(parse_error(R"({"prompt": "x", "response_format": {"type": "xml"}})").find("response_format"),
            std::string::npos);
  EXPECT_NE(parse_error("{}", true).find("'messages' is required"), std::string::npos);
  EXPECT_EQ(parse_error(R"({"messages": []})", true), "'messages' is empty");
  EXPECT_NE(parse_error(R"({"messages": [{"content": "x"}]})", true).find("messages[0].role"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true)
                .find("messages[0].content[0]"),
            std::string::npos);
}

TEST(OpenAiRequest, LogprobsPenaltiesAndBias) {
  auto r = parse_request(R"({"prompt": "x", "logprobs": 5, "echo": true, "presence_penalty": -2,
                             "frequency_penalty": 1.5, "logit_bias": {"7": -100, "12": 3.5}})",
                         false);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->params.logprobs, 5);
  EXPECT_EQ(r->params.prompt_logprobs, 5);
  EXPECT_TRUE(r->echo);
  EXPECT_FLOAT_EQ(r->params.sampling.presence_penalty, -2.0f);
  EXPECT_FLOAT_EQ(r->params.sampling.frequency_penalty, 1.5f);
  EXPECT_EQ(r->params.sampling.logit_bias,
            (std::vector<std::pair<int32_t, float>>{{12, 3.5f}, {7, -100.0f}}));  // keys in JSON order
  auto c = parse_request(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
                             "top_logprobs": 20})",
                         true);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->params.logprobs, 20);
  EXPECT_EQ(c->params.prompt_logprobs, -1);
  auto off = parse_request(R"({"prompt": "x", "echo": true})", false);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->params.logprobs, -1);
  EXPECT_EQ(off->params.prompt_logprobs, -1);
  const char* chat_msgs = R"("messages": [{"role": "user", "content": "x"}])";
  for (auto [body, chat, needle] : std::vector<std::tuple<std::string, bool, std::string>>{
           {R"({"prompt": "x", "logprobs": 6})", false, "'logprobs' is 6"},
           {R"({"prompt": "x", "logprobs": -1})", false, "'logprobs' is -1"},
           {R"({"prompt": "x", "echo": 1})", false, "'echo' must be true or false"},
           {R"({"prompt": "x", "top_logprobs": 2})", false, "'top_logprobs' is not supported"},
           {std::string("{") + chat_msgs + R"(, "logprobs": true, "top_logprobs": 21})", true,
            "'top_logprobs' is 21"},
           {std::string("{") + chat_msgs + R"(, "top_logprobs": 1})", true, "'top_logprobs' needs"},
           {R"({"prompt": "x", "presence_penalty": 2.5})", false, "'presence_penalty' is 2.5"},
           {R"({"prompt": "x", "frequency_penalty": "1"})", false, "'frequency_penalty' must be a number"},
           {R"({"prompt": "x", "logit_bias": [1]})", false, "'logit_bias' must be an object"},
           {R"({"prompt": "x", "logit_bias": {"a1": 1}})", false,
            "'logit_bias' key \"a1\" is not a token id"},
           {R"({"prompt": "x", "logit_bias": {"-3": 1}})", false, "'logit_bias' key \"-3\""},
           {R"({"prompt": "x", "logit_bias": {"3": 101}})", false, "'logit_bias'[\"3\"] is 101"},
           {R"({"prompt": "x", "logit_bias": {"3": "up"}})", false,
            "'logit_bias'[\"3\"] must be a number"}}) {
    EXPECT_NE(parse_error(body, chat).find(needle), std::string::npos)
        << body << " -> " << parse_error(body, chat);
  }
}

TEST(OpenAiResponse, BodiesHaveTheOpenAiShape) {
  CompletionEvent last;
  last.done = true;
  last.finish = FinishReason::length;
  last.n_prompt = 4;
  last.n_gen = 3;
  last.n_cached = 1;
  last.decode_s = 0.5;
  ApiResponseHead h{"cmpl-1", "m", 99, false};
  json b = completion_body(h, json::array({choice_body(false, 0, "abc", last.finish)}), last);
  EXPECT_EQ(b["object"], "text_completion");
  EXPECT_EQ(b["choices"][0]["text"], "abc");
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b["usage"]["total_tokens"], 7);
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], 1);  // from the prefix cache
  EXPECT_EQ(b["timings"]["cache_n"], 1);
  EXPECT_EQ(b["timings"]["prompt_n"], 3);  // llama-server's: the prompt tokens evaluated
  EXPECT_DOUBLE_EQ(b["timings"]["predicted_per_second"].get<double>(), 4.0);  // 2 decode evals in 0.5 s
  h.chat = true;
  b = completion_body(h, json::array({choice_body(true, 0, "abc", last.finish)}), last);
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_EQ(b["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(b["choices"][0]["message"]["content"], "abc");
  json c = chunk_body(h, 0, "x", nullptr, true);
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(c["choices"][0]["delta"]["content"], "x");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  c = chunk_body(h, 2, "", "stop", false);
  EXPECT_EQ(c["choices"][0]["index"], 2);
  EXPECT_TRUE(c["choices"][0]["delta"].empty());
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  json e = error_body("bad", 400);
  EXPECT_EQ(e["error"]["message"], "bad");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["code"], 400);
}

}  // namespace
}  // namespace strata::server
