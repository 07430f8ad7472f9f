// A strata serve on a free port over the bundled smoke model (two slots, 96 tokens each unless set, its
// forward optionally slowed), a client for it, a polling wait and the text of an SSE body: the shared fixture
// of the end-to-end server tests.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <functional>
#include <thread>

#include "common/fixtures.h"
#include "runtime/generate.h"
#include "server/http_server.h"
#include "server/openai_api.h"

namespace strata::server::testing {

using nlohmann::json;

// The model's forward, slept before: generation slow enough for a client to hang up while its
// request still runs.
class SlowRunner : public BatchRunner {
 public:
  SlowRunner(const Model& m, int ms) : m_(m), ms_(ms) {}
  Status forward(std::span<Session* const> s, const TokenBatch& b, float* logits) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return m_.forward(s, b, logits);
  }

 private:
  const Model& m_;
  int ms_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m =
        Model::load(::strata::testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 2});
    ASSERT_TRUE(m.ok()) << m.message();
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void start(ServerOptions so = {}, EngineOptions eo = {}, int eval_delay_ms = 0) {
    eo.n_slots = 2;
    runner_ = std::make_unique<SlowRunner>(*model_, eval_delay_ms);
    auto e = Engine::create(
        *runner_, [this](int n_batch) { return model_->new_session({.n_ctx = n_ctx_, .n_batch = n_batch}); },
        &model_->tokenizer(), model_->n_vocab(), eo);
    ASSERT_TRUE(e.ok()) << e.message();
    engine_ = std::move(*e);
    so.port = 0;
    so.model_name = "smoke";
    server_ = std::make_unique<HttpServer>(*engine_, model_->tokenizer(), chat_format_, so);
    auto port = server_->bind();
    ASSERT_TRUE(port.ok()) << port.message();
    port_ = *port;
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
    engine_.reset();
  }
  httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }
  // What generate() gives for `prompt` with greedy sampling.
  static std::string reference(const std::string& prompt, int n) {
    auto s = model_->new_session({.n_ctx = 96});
    GenerateOptions o;
    o.n_predict = n;
    o.sampling.temp = 0;
    std::string out;
    auto r =
        generate(*model_, **s, model_->tokenizer(), model_->n_vocab(), prompt, o, [&](std::string_view t) {
          out += t;
          return true;
        });
    EXPECT_TRUE(r.ok()) << r.message();
    return out;
  }
  static Model* model_;
  int n_ctx_ = 96;                               // a slot's context (set before start())
  ChatFormat chat_format_ = ChatFormat::chatml;  // the server's (set before start())
  std::unique_ptr<SlowRunner> runner_;           // before engine_: destroyed after it
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};
inline Model* HttpServerTest::model_ = nullptr;

// Polls cond every 5 ms for up to timeout_ms; its last value.
inline bool wait_for(const std::function<bool()>& cond, int timeout_ms) {
  for (int i = 0; i < timeout_ms / 5; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// The text of an SSE body: every data chunk's text/delta.content, up to [DONE] (which must come).
inline std::string sse_text(const std::string& body, bool chat, std::string* finish) {
  std::string text;
  bool done = false;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string payload = body.substr(at + 6, end - at - 6);
    at = end;
    if (payload == "[DONE]") {
      done = true;
      break;
    }
    json j = json::parse(payload);
    if (j["choices"].empty()) continue;  // usage chunk
    const json& c = j["choices"][0];
    if (!c["finish_reason"].is_null()) *finish = c["finish_reason"].get<std::string>();
    if (chat) {
      if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
    } else {
      text += c["text"].get<std::string>();
    }
  }
  EXPECT_TRUE(done) << body;
  return text;
}

}  // namespace strata::server::testing
