// Model text is bytes: a scripted model that emits an invalid UTF-8 sequence must still get a 200
// with valid JSON (U+FFFD in place of the bad bytes), streamed or not — never a crashed server.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "runtime/fake_session.h"
#include "server/http_server.h"

namespace strata::server {
namespace {

using testing_fakes::ByteTokenizer;
using testing_fakes::kVocab;
using testing_fakes::ScriptSession;

TEST(HttpServerBytes, InvalidUtf8BecomesReplacementCharacters) {
  ByteTokenizer tok;
  EngineOptions eo;
  eo.n_slots = 1;
  // After a 1-token prompt: 0xC3 (a lead byte) then ' ' (not a continuation), then "ok".
  testing_fakes::EvalRunner runner;
  auto e = Engine::create(
      runner,
      [](int) {
        return Result<std::unique_ptr<Session>>(
            std::make_unique<ScriptSession>(64, std::vector<int32_t>{'x', 0xC3, ' ', 'o', 'k'}));
      },
      &tok, kVocab, eo);
  ASSERT_TRUE(e.ok()) << e.message();
  ServerOptions so;
  so.port = 0;
  HttpServer http(**e, tok, std::nullopt, so);
  auto port = http.bind();
  ASSERT_TRUE(port.ok());
  std::thread t([&] { http.run(); });
  httplib::Client c("127.0.0.1", *port);
  auto r =
      c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 4, "temperature": 0})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  auto b = nlohmann::json::parse(r->body, nullptr, false);
  ASSERT_FALSE(b.is_discarded()) << r->body;
  EXPECT_EQ(b["choices"][0]["text"], "\xEF\xBF\xBD ok");
  r = c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 4, "temperature": 0, "stream": true})",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("\xEF\xBF\xBD"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos) << r->body;
  http.stop();
  t.join();
}

}  // namespace
}  // namespace strata::server
