// /tokenize, /detokenize (llama.cpp's and vLLM's shapes), /apply-template, /v1/models/{id} and CORS
// (off by default; an allowed origin gets the header on JSON and SSE answers; preflight without key).
#include <gtest/gtest.h>

#include "server/http_fixture.h"
#include "server/text_routes.h"
#include "text/chat_template_jinja.h"

namespace strata::server {
namespace {

using nlohmann::json;
using testing::HttpServerTest;

json post_json(httplib::Client& c, const char* path, const json& body, int want = 200) {
  auto r = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, want) << path << " " << r->body;
  return json::parse(r->body);
}

// --jinja: the template renders /apply-template, /tokenize's messages and the chat route's prompt, with
// chat_template_kwargs as variables; a template that fails is a 400 naming its line and column.
TEST_F(HttpServerTest, JinjaTemplateRendersChatRoutes) {
  auto cj = ChatJinja::parse(
      "{{ bos_token }}{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}"
      "{% endif %}<{{ m.role }}>{{ m.content | trim }}\n{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% if enable_thinking %}<think>{% endif %}{% endif %}",
      "<s>", "</s>");
  ASSERT_TRUE(cj.ok()) << cj.message();
  ServerOptions so;
  so.chat_jinja = std::make_shared<const ChatJinja>(std::move(*cj));
  start(so);
  auto c = client();
  const json msgs = json::array({json{{"role", "user"}, {"content", " Hi "}}});
  json a = post_json(c, "/apply-template",
                     json{{"messages", msgs}, {"chat_template_kwargs", {{"enable_thinking", true}}}});
  EXPECT_EQ(a["prompt"], "<s><user>Hi\n<assistant><think>");
  json t = post_json(c, "/tokenize", json{{"messages", msgs}, {"add_generation_prompt", false}});
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(),
            model_->tokenizer().encode("<s><user>Hi\n", false, true));
  const json bad =
      json{{"messages", json::array({json{{"role", "tool"}, {"content", "x"}}})}, {"max_tokens", 1}};
  for (const char* path : {"/apply-template", "/v1/chat/completions"}) {
    json e = post_json(c, path, bad, 400);
    EXPECT_EQ(e["error"]["message"], "chat template: line 1, column 82: raise_exception: no tools here")
        << path;
  }
  json ok = post_json(c, "/v1/chat/completions", json{{"messages", msgs}, {"max_tokens", 2}});
  EXPECT_EQ(ok["choices"][0]["message"]["role"], "assistant");
}

TEST_F(HttpServerTest, TokenizeDetokenizeAndApplyTemplate) {
  start();
  auto c = client();
  const Tokenizer& tok = model_->tokenizer();
  const std::string text = "Hello world, it is a truth";
  json t = post_json(c, "/tokenize", json{{"content", text}});
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), tok.encode(text, false, true));
  json ts = post_json(c, "/tokenize", json{{"content", text}, {"add_special", true}, {"with_pieces", true}});
  const std::vector<int32_t> with_bos = tok.encode(text, true, true);
  ASSERT_EQ(ts["tokens"].size(), with_bos.size());
  for (size_t i = 0; i < with_bos.size(); ++i) {
    EXPECT_EQ(ts["tokens"][i]["id"], with_bos[i]);
    EXPECT_EQ(ts["tokens"][i]["piece"], tok.token_to_piece(with_bos[i], true));
  }
  json v = post_json(c, "/tokenize", json{{"prompt", text}});  // vLLM: special tokens added by default
  EXPECT_EQ(v["tokens"].get<std::vector<int32_t>>(), with_bos);
  EXPECT_EQ(v["count"], with_bos.size());
  EXPECT_EQ(v["max_model_len"], 96);
  json d = post_json(c, "/detokenize", json{{"tokens", t["tokens"]}});
  EXPECT_EQ(d["content"], text);
  EXPECT_EQ(d["prompt"], text);
  const json msgs = json::array(
      {json{{"role", "developer"}, {"content", "Be brief."}}, json{{"role", "user"}, {"content", "Hi"}}});
  json a = post_json(c, "/apply-template", json{{"messages", msgs}});
  auto want =
      chat_apply(ChatFormat::chatml, std::vector<ChatMessage>{{"system", "Be brief."}, {"user", "Hi"}}, true);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(a["prompt"], *want);
  json vc = post_json(c, "/tokenize", json{{"messages", msgs}});
  EXPECT_EQ(vc["tokens"].get<std::vector<int32_t>>(), tok.encode(*want, false, true));
  // errors name the field
  auto has = [](const json& e, const std::string& needle) {
    return e["error"]["message"].get<std::string>().find(needle) != std::string::npos;
  };
  EXPECT_TRUE(has(post_json(c, "/tokenize", json{{"text", "x"}}, 400), "'content' is required"));
  EXPECT_TRUE(
      has(post_json(c, "/tokenize", json{{"content", "x"}, {"with_pieces", 1}}, 400), "'with_pieces'"));
  EXPECT_TRUE(has(post_json(c, "/detokenize", json{{"tokens", {1, -4}}}, 400), "'tokens'[1] = -4"));
  EXPECT_TRUE(has(post_json(c, "/detokenize", json{{"tokens", "1 2"}}, 400), "'tokens' is required"));
  EXPECT_TRUE(
      has(post_json(c, "/apply-template", json{{"messages", json::array()}}, 400), "'messages' is empty"));
  // the model by id
  auto m = c.Get("/v1/models/smoke");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(json::parse(m->body)["id"], "smoke");
  c.set_url_encode(false);         // the path goes as written
  m = c.Get("/models/sm%6Fk%65");  // escaped, as clients send an id with a '/'
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200) << m->body;
  m = c.Get("/v1/models/other");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 404);
  EXPECT_NE(m->body.find("model 'other' does not exist"), std::string::npos) << m->body;
}

TEST_F(HttpServerTest, CorsIsOffByDefault) {
  start();
  auto c = client();
  httplib::Headers h{{"Origin", "http://app.example"}};
  auto r = c.Get("/v1/models", h);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
}

TEST_F(HttpServerTest, CorsAllowsListedOriginsAndPreflightsWithoutTheKey) {
  ServerOptions so;
  so.api_key = "k";
  so.cors_origins = {"http://app.example"};
  start(so);
  auto c = client();
  httplib::Headers pre{{"Origin", "http://app.example"},
                       {"Access-Control-Request-Method", "POST"},
                       {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto r = c.Options("/v1/chat/completions", pre);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  httplib::Headers h{{"Origin", "http://app.example"}, {"Authorization", "Bearer k"}};
  r = c.Post("/v1/completions", h, R"({"prompt": "The", "max_tokens": 2, "stream": true})",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://app.example");  // SSE too
  EXPECT_NE(r->body.find("[DONE]"), std::string::npos);
  r = c.Post("/v1/completions", httplib::Headers{{"Origin", "http://app.example"}}, R"({"prompt": "x"})",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);  // the key is still needed beyond the preflight
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  r = c.Get("/v1/models", httplib::Headers{{"Origin", "http://evil.example"}, {"Authorization", "Bearer k"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
}

TEST(Cors, AllowOrigin) {
  const std::vector<std::string> list = {"http://a.example"}, any = {"*"};
  EXPECT_EQ(cors_allow_origin(list, "http://a.example"), "http://a.example");
  EXPECT_EQ(cors_allow_origin(list, "http://b.example"), "");
  EXPECT_EQ(cors_allow_origin(list, ""), "");
  EXPECT_EQ(cors_allow_origin(any, "http://b.example"), "*");
}

}  // namespace
}  // namespace strata::server
