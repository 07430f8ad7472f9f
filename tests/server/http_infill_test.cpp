// Fill-in-the-middle through the server: `suffix` on /v1/completions and llama-server's /infill
// (its fields in, its /completion shape out, streamed or not) give what the same FIM tokens give
// as a plain prompt; bad fields and a model without FIM tokens are 400s naming the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "model/synth.h"
#include "server/http_fixture.h"
#include "text/fim.h"

namespace strata::server {
namespace {

using nlohmann::json;
using testing::HttpServerTest;

// The server over a synth model whose vocabulary has Qwen2.5-Coder's FIM tokens.
class FimServerTest : public HttpServerTest {
 protected:
  static void SetUpTestSuite() {
    SynthSpec s;
    s.n_layer = 1;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_expert = 2;
    s.n_expert_used = 1;
    s.expert_ffn = 64;
    s.n_vocab = 700;
    s.n_ctx = 256;
    s.fim = true;
    path_ = (std::filesystem::temp_directory_path() / ("strata_fim_" + std::to_string(getpid()) + ".gguf"))
                .string();
    ASSERT_TRUE(synth_write(s, path_).ok());
    auto m = Model::load(path_, {.n_threads = 2});
    ASSERT_TRUE(m.ok()) << m.message();
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    std::filesystem::remove(path_);
  }
  // The completion of `tokens` as a plain prompt (greedy).
  std::string plain(const std::vector<int32_t>& tokens, int n) {
    auto c = client();
    auto r = c.Post("/v1/completions", json{{"prompt", tokens}, {"max_tokens", n}, {"temperature", 0}}.dump(),
                    "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return r ? json::parse(r->body)["choices"][0]["text"].get<std::string>() : "";
  }
  static inline std::string path_;
};

TEST_F(FimServerTest, SuffixAndInfillAreThePromptsFimTokens) {
  start();
  const Tokenizer& tok = model_->tokenizer();
  ASSERT_TRUE(tok.fim_tokens().usable());
  FimInput in;
  in.prefix = tok.encode("the first", false, false);
  in.suffix = " and the last";
  auto toks = fim_prompt(tok, in, 1000);
  ASSERT_TRUE(toks.ok());
  const std::string want = plain(*toks, 8);
  auto c = client();
  const json req{{"prompt", "the first"}, {"suffix", " and the last"}, {"max_tokens", 8}, {"temperature", 0}};
  auto r = c.Post("/v1/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json b = json::parse(r->body);
  EXPECT_EQ(b["choices"][0]["text"], want);
  EXPECT_EQ(b["usage"]["prompt_tokens"], static_cast<int>(toks->size()));

  // /infill: input_prefix, input_suffix, prompt (the middle's start) and another file.
  in.middle = " so";
  in.extra = {{"notes.txt", "the other file"}};
  toks = fim_prompt(tok, in, 1000);
  ASSERT_TRUE(toks.ok());
  const std::string want_infill = plain(*toks, 6);
  const json ireq{{"input_prefix", "the first"},
                  {"input_suffix", " and the last"},
                  {"prompt", " so"},
                  {"input_extra", json::array({{{"filename", "notes.txt"}, {"text", "the other file"}}})},
                  {"n_predict", 6},
                  {"temperature", 0}};
  r = c.Post("/infill", ireq.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  b = json::parse(r->body);
  EXPECT_EQ(b["content"], want_infill);
  EXPECT_EQ(b["stop"], true);
  EXPECT_EQ(b["stop_type"], "limit");
  EXPECT_EQ(b["tokens_predicted"], 6);
  EXPECT_EQ(b["tokens_evaluated"], static_cast<int>(toks->size()));
  EXPECT_TRUE(b["timings"].contains("predicted_n")) << b.dump();

  json sreq = ireq;
  sreq["stream"] = true;
  r = c.Post("/infill", sreq.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string text;
  int n_stop = 0;
  size_t at = 0;
  while ((at = r->body.find("data: ", at)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", at);
    json j = json::parse(r->body.substr(at + 6, end - at - 6));  // no [DONE] in this shape
    at = end;
    text += j["content"].get<std::string>();
    if (j["stop"].get<bool>()) {
      ++n_stop;
      EXPECT_EQ(j["tokens_predicted"], 6);
    }
  }
  EXPECT_EQ(text, want_infill);
  EXPECT_EQ(n_stop, 1);
}

TEST_F(FimServerTest, BadFieldsAreNamed) {
  start();
  auto c = client();
  auto bad = [&](const char* path, const json& body, const std::string& needle) {
    auto r = c.Post(path, body.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find(needle), std::string::npos) << r->body;
  };
  bad("/infill", {{"input_prefix", 5}}, "'input_prefix' must be a string");
  bad("/infill", {{"input_extra", "x"}}, "'input_extra' must be an array");
  bad("/infill", {{"input_extra", json::array({{{"text", 1}}})}}, "'input_extra'[0].text must be a string");
  bad("/infill", {{"n", 2}}, "'n' must be 1 on /infill");
  bad("/v1/completions", {{"prompt", "a"}, {"suffix", 5}}, "'suffix' must be a string");
  bad("/v1/completions", {{"prompt", "a"}, {"suffix", "b"}, {"echo", true}, {"logprobs", 1}},
      "'echo' with 'suffix'");
}

TEST_F(HttpServerTest, InfillNeedsFimTokens) {
  start();
  auto c = client();
  auto r = c.Post("/v1/completions", json{{"prompt", "a"}, {"suffix", "b"}, {"max_tokens", 2}}.dump(),
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("no fill-in-the-middle tokens"), std::string::npos) << r->body;
  r = c.Post("/infill", json{{"input_prefix", "a"}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  // An empty suffix is no suffix (OpenAI's default): a plain completion.
  r = c.Post("/v1/completions", json{{"prompt", "a"}, {"suffix", ""}, {"max_tokens", 2}}.dump(),
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

}  // namespace
}  // namespace strata::server
