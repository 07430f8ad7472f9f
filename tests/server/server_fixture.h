// The fixture of the HTTP server's tests: the bundled smoke model behind a 2-slot engine, its
// forward optionally slowed (so that clients can hang up or the server stop mid-request), and an
// HttpServer on a free port run on its own thread.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/fixtures.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "server/http_server.h"

namespace strata::server {

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
    auto m = Model::load(strata::testing::source_dir() + "/tests/data/bundled_smoke.gguf", {.n_threads = 2});
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
        *runner_, [](int n_batch) { return model_->new_session({.n_ctx = 96, .n_batch = n_batch}); },
        &model_->tokenizer(), model_->n_vocab(), eo);
    ASSERT_TRUE(e.ok()) << e.message();
    engine_ = std::move(*e);
    so.port = 0;
    so.model_name = "smoke";
    server_ = std::make_unique<HttpServer>(*engine_, model_->tokenizer(), ChatFormat::chatml, so);
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
  std::unique_ptr<SlowRunner> runner_;  // before engine_: destroyed after it
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};
inline Model* HttpServerTest::model_ = nullptr;

}  // namespace strata::server
