// The live dashboard's routes (server/stats_feed.h): the page is served from the binary without the
// API key, the snapshot and the event stream need it; the stream sends "event: stats" snapshots at
// the interval asked for, and "event: end" when the server stops.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "server/http_fixture.h"
#include "server/http_server.h"

namespace strata::server {
namespace {

using nlohmann::json;
using testing::HttpServerTest;
using testing::wait_for;

// The data of every "event: stats" block of an SSE body, parsed.
std::vector<json> stats_events(const std::string& body) {
  std::vector<json> out;
  const std::string mark = "event: stats\ndata: ";
  for (size_t at = body.find(mark); at != std::string::npos; at = body.find(mark, at)) {
    at += mark.size();
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) break;
    out.push_back(json::parse(body.substr(at, end - at)));
  }
  return out;
}

TEST_F(HttpServerTest, DashboardPageAndStatsSnapshot) {
  ServerOptions so;
  so.api_key = "k";
  start(so);
  auto c = client();
  for (const char* path : {"/", "/dashboard"}) {
    auto r = c.Get(path);  // no key: the page holds no numbers
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
    EXPECT_NE(r->body.find("/v1/strata/events"), std::string::npos);
    EXPECT_EQ(r->body.find("http://"), std::string::npos) << "the page must not load anything from elsewhere";
  }
  auto denied = c.Get("/v1/strata/stats");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  c.set_bearer_token_auth("k");
  auto done = c.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 3, "temperature": 0})",
                     "application/json");
  ASSERT_TRUE(done);
  ASSERT_EQ(done->status, 200) << done->body;
  auto r = c.Get("/v1/strata/stats");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json s = json::parse(r->body);
  EXPECT_EQ(s["model"], "smoke");
  EXPECT_EQ(s["requests"]["ok"], 1);
  EXPECT_EQ(s["requests"]["running"], 0);
  EXPECT_EQ(s["tokens"]["generated"], 3);
  EXPECT_EQ(s["slots"].size(), 2u);
  EXPECT_GT(s["latency_s"]["ttft"]["p50"].get<double>(), 0.0);
  EXPECT_GT(s["memory"]["rss"].get<uint64_t>(), 0u);
  EXPECT_TRUE(s["experts"].is_null());  // the fixture's engine has no expert store
}

TEST_F(HttpServerTest, EventsStreamSnapshotsAndEndsOnStop) {
  ServerOptions so;
  so.api_key = "k";
  start(so);
  auto c = client();
  auto denied = c.Get("/v1/strata/events");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  std::mutex mu;
  std::string body;
  std::atomic<bool> ended{false};
  std::thread reader([&] {
    auto rc = client();
    rc.set_bearer_token_auth("k");
    auto r = rc.Get("/v1/strata/events?interval_ms=100", [&](const char* data, size_t n) {
      std::lock_guard<std::mutex> lk(mu);
      body.append(data, n);
      return true;
    });
    ended = true;
  });
  auto events = [&] {
    std::lock_guard<std::mutex> lk(mu);
    return stats_events(body);
  };
  EXPECT_TRUE(wait_for([&] { return events().size() >= 3; }, 20000));
  const std::vector<json> got = events();
  ASSERT_GE(got.size(), 3u);
  EXPECT_LT(got[0]["uptime_s"].get<double>(), got[2]["uptime_s"].get<double>());
  EXPECT_EQ(got[0]["slots"].size(), 2u);
  server_->stop();
  EXPECT_TRUE(wait_for([&] { return ended.load(); }, 20000));
  reader.join();
  std::lock_guard<std::mutex> lk(mu);
  EXPECT_NE(body.find("event: end\ndata: {}\n\n"), std::string::npos)
      << body.substr(body.size() > 300 ? body.size() - 300 : 0);
}

}  // namespace
}  // namespace strata::server
