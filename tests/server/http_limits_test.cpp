// strata serve against hostile or careless clients (issue 18's findings): idle and trickling
// connections do not hold up others, a chunked body over the limit is refused as it arrives, a busy
// port is an error, stop() ends an open stream with a final event at once, a non-streamed request
// is cancelled when its client goes, the queue and the stop list are bounded, max_tokens 0
// generates nothing, waiting counts from the request's arrival, and a stream's client that stops
// reading is dropped at --max-unsent-bytes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/clock.h"
#include "server/http_fixture.h"

namespace strata::server {
namespace {

using testing::HttpServerTest;
using testing::wait_for;

using nlohmann::json;

// A client on a plain socket: it sends what the test says, when it says.
class RawClient {
 public:
  // rcvbuf > 0: the socket's receive buffer (SO_RCVBUF, before connecting), a client that reads slowly
  explicit RawClient(int port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() { close(); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool send(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // What arrives until the peer closes, `needle` shows up, or timeout_ms pass.
  std::string read(int timeout_ms, std::string_view needle = {}) {
    std::string got;
    const double end = now_seconds() + timeout_ms / 1e3;
    while (now_seconds() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
      if (!needle.empty() && got.find(needle) != std::string::npos) break;
    }
    return got;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string post_head(const std::string& path, size_t content_length) {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(content_length) + "\r\n\r\n";
}

TEST_F(HttpServerTest, IdleAndTricklingConnectionsDoNotHoldUpHealth) {
  start();
  std::vector<std::unique_ptr<RawClient>> idle, trickle;
  for (int i = 0; i < 64; ++i) idle.push_back(std::make_unique<RawClient>(port_));
  for (int i = 0; i < 8; ++i) trickle.push_back(std::make_unique<RawClient>(port_));
  std::atomic<bool> done{false};
  std::thread dripper([&] {  // one header byte per connection every 20 ms
    const std::string head = "GET /health HTTP/1.1\r\nHost: t\r\nX-Slow: ";
    for (size_t at = 0; !done; ++at) {
      for (auto& t : trickle) t->send(std::string(1, at < head.size() ? head[at] : 'x'));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  httplib::Client c("127.0.0.1", port_);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(2, 0);
  double worst = 0;
  for (int i = 0; i < 10; ++i) {
    const double t0 = now_seconds();
    auto r = c.Get("/health");
    worst = std::max(worst, now_seconds() - t0);
    ASSERT_TRUE(r) << "probe " << i << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
  }
  done = true;
  dripper.join();
  std::printf("/health under 64 idle + 8 trickling connections: worst of 10 probes %.2f ms\n", worst * 1e3);
  EXPECT_LT(worst, 1.0);  // the old server: unanswered until a trickling client gave up
}

TEST_F(HttpServerTest, BadBytesInTheRequestLineAreA404NotACrash) {
  start();
  RawClient rc(port_);
  ASSERT_TRUE(rc.send("GET /\xff\xfe HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::string got = rc.read(2000, "}}");
  EXPECT_EQ(got.rfind("HTTP/1.1 404", 0), 0u) << got;
  EXPECT_NE(got.find("no route for GET /\xEF\xBF\xBD"), std::string::npos) << got;
  auto c = client();
  auto r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, IdleConnectionsTimeOut) {
  ServerOptions so;
  so.timeout_s = 0.2;
  start(so);
  RawClient idle(port_), slow(port_);
  ASSERT_TRUE(idle.connected());
  ASSERT_TRUE(slow.send("GET /health HTTP/1.1\r\nHo"));  // a header that never ends
  const double t0 = now_seconds();
  EXPECT_EQ(idle.read(3000), "");  // closed by the server, nothing said
  EXPECT_EQ(slow.read(3000), "");
  EXPECT_LT(now_seconds() - t0, 2.0);
}

TEST_F(HttpServerTest, ChunkedBodyOverTheLimitIsRefusedAsItArrives) {
  ServerOptions so;
  so.max_body_bytes = 64u << 10;
  start(so);
  RawClient rc(port_);
  ASSERT_TRUE(rc.send(
      "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: "
      "chunked\r\n\r\n"));
  const std::string chunk = "4000\r\n" + std::string(16384, 'a') + "\r\n";
  size_t sent = 0, at = 0;
  std::string answer;
  while (sent < (64u << 20)) {  // 64 MiB unless the server answers first
    pollfd p{rc.fd(), POLLIN | POLLOUT, 0};
    ASSERT_GT(::poll(&p, 1, 2000), 0) << "no progress after " << sent << " bytes";
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) break;
    const ssize_t n = ::send(rc.fd(), chunk.data() + at, chunk.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) break;
    sent += static_cast<size_t>(n);
    at = (at + static_cast<size_t>(n)) % chunk.size();
  }
  answer = rc.read(2000, "}}");
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
  EXPECT_NE(answer.find("larger than the server's limit"), std::string::npos) << answer;
  std::printf("chunked body over a 64 KiB limit: refused after %.1f MiB sent\n", sent / 1048576.0);
  EXPECT_LT(sent, 16u << 20);
}

TEST_F(HttpServerTest, ASecondServerOnABusyPortFailsNamingIt) {
  start();
  ServerOptions so;
  so.port = port_;
  HttpServer second(*engine_, model_->tokenizer(), ChatFormat::chatml, so);
  auto r = second.bind();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("127.0.0.1:" + std::to_string(port_)), std::string::npos) << r.message();
}

TEST_F(HttpServerTest, StopEndsOpenStreamsWithAFinalEvent) {
  start({}, {}, /*eval_delay_ms=*/40);  // 90 tokens would take 3.6 s
  std::mutex mu;
  std::string streamed;
  std::thread streamer([&] {
    httplib::Client c("127.0.0.1", port_);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = R"({"prompt": "The", "max_tokens": 90, "ignore_eos": true, "stream": true})";
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
      std::lock_guard<std::mutex> lk(mu);
      streamed.append(d, n);
      return true;
    };
    c.send(req);
  });
  int plain_status = 0;
  std::string plain_body;
  std::thread waiter([&] {
    auto c = client();
    auto r = c.Post("/v1/completions", R"({"prompt": "The", "max_tokens": 90, "ignore_eos": true})",
                    "application/json");
    if (r) plain_status = r->status, plain_body = r->body;
  });
  ASSERT_TRUE(wait_for(
      [&] {
        std::lock_guard<std::mutex> lk(mu);
        return streamed.find("\"text\"") != std::string::npos && engine_->counters().running == 2;
      },
      5000));
  RawClient trickler(port_);  // half a request header: it must not hold up the stop
  ASSERT_TRUE(trickler.send("GET /hea"));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double t0 = now_seconds();
  server_->stop();
  thread_.join();
  const double took = now_seconds() - t0;
  streamer.join();
  waiter.join();
  std::printf("stop() with a stream, a request and half a header open: %.1f ms\n", took * 1e3);
  EXPECT_LT(took, 1.0);
  EXPECT_NE(streamed.find("server shutting down"), std::string::npos) << streamed;
  EXPECT_EQ(streamed.substr(streamed.size() - 14), "data: [DONE]\n\n") << streamed;
  EXPECT_EQ(plain_status, 503) << plain_body;
}

TEST_F(HttpServerTest, ANonStreamedRequestIsCancelledWhenItsClientGoes) {
  start({}, {}, /*eval_delay_ms=*/10);
  RawClient rc(port_);
  const std::string body = R"({"prompt": "The", "max_tokens": 90, "ignore_eos": true})";
  ASSERT_TRUE(rc.send(post_head("/v1/completions", body.size()) + body));
  ASSERT_TRUE(wait_for([&] { return engine_->counters().running == 1; }, 3000));
  rc.close();
  EXPECT_TRUE(wait_for([&] { return engine_->counters().requests_cancelled == 1; }, 3000));
}

TEST_F(HttpServerTest, AFullQueueIs503WithRetryAfter) {
  EngineOptions eo;
  eo.max_queue = 0;
  start({}, eo, /*eval_delay_ms=*/20);
  std::vector<std::thread> busy;
  for (int i = 0; i < 2; ++i)
    busy.emplace_back([&] {
      auto c = client();
      c.Post("/v1/completions", R"({"prompt": "The", "max_tokens": 20, "ignore_eos": true})",
             "application/json");
    });
  ASSERT_TRUE(wait_for([&] { return engine_->counters().running == 2; }, 3000));
  auto c = client();
  auto r = c.Post("/v1/completions", R"({"prompt": "The", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  for (auto& t : busy) t.join();
}

TEST_F(HttpServerTest, ConnectionsBeyondTheBoundGetA503) {
  ServerOptions so;
  so.max_connections = 4;
  start(so);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<RawClient>(port_));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  RawClient extra(port_);
  ASSERT_TRUE(extra.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::string got = extra.read(2000, "}}");
  EXPECT_EQ(got.rfind("HTTP/1.1 503", 0), 0u) << got;
  EXPECT_NE(got.find("Retry-After: 1"), std::string::npos) << got;
  EXPECT_NE(got.find("--max-connections"), std::string::npos) << got;
  held.pop_back();  // one goes: a new client gets in
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto c = client();
  auto r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, MaxTokensZeroGeneratesNothing) {
  start();
  auto c = client();
  auto r =
      c.Post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 0})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json b = json::parse(r->body);
  EXPECT_EQ(b["choices"][0]["text"], "");
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b["usage"]["completion_tokens"], 0);
  EXPECT_GT(b["usage"]["prompt_tokens"].get<int>(), 0);
  r = c.Post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 0, "stream": true})",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("\"finish_reason\":\"length\""), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos) << r->body;
  const EngineCounters k = engine_->counters();
  EXPECT_EQ(k.batches, 0u);  // not even the prompt was evaluated
  EXPECT_EQ(k.gen_tokens, 0u);
}

TEST_F(HttpServerTest, TheStopListIsBounded) {
  start();
  auto c = client();
  json req{{"prompt", "The"}, {"max_tokens", 2}};
  req["stop"] = std::vector<std::string>(17, "x");
  auto r = c.Post("/v1/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("'stop' has 17 strings"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("--max-stop"), std::string::npos) << r->body;
  req["stop"] = std::vector<std::string>{"ok", std::string(257, 's')};
  r = c.Post("/v1/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("'stop'[1] is 257 bytes"), std::string::npos) << r->body;
  req["stop"] = std::vector<std::string>(16, std::string(256, 's'));
  r = c.Post("/v1/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(HttpServerTest, APromptTooLongInBytesIsRefusedBeforeTokenizing) {
  start();
  auto c = client();
  auto r = c.Post("/v1/completions", json{{"prompt", std::string(1u << 20, 'a')}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("prompt is 1048576 bytes but the context of a slot is 96 tokens"), std::string::npos)
      << r->body;
}

TEST_F(HttpServerTest, WaitingCountsFromTheRequestsArrival) {
  start();
  RawClient rc(port_);
  const std::string body = R"({"prompt": "The", "max_tokens": 2, "temperature": 0})";
  ASSERT_TRUE(rc.send(post_head("/v1/completions", body.size())));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a slow upload
  ASSERT_TRUE(rc.send(body));
  const std::string got = rc.read(5000, "}}");
  const size_t at = got.find("\r\n\r\n");
  ASSERT_NE(at, std::string::npos) << got;
  json b = json::parse(got.substr(at + 4), nullptr, false);
  ASSERT_FALSE(b.is_discarded()) << got;
  // Counted from the connection's accept: the 300 ms upload, less however late the loaded I/O
  // thread accepted it (counted from the body's end it would be a few ms).
  EXPECT_GE(b["timings"]["ttft_ms"].get<double>(), 200.0) << got;
}

TEST_F(HttpServerTest, PropsAndSlotsDescribeTheServer) {
  ServerOptions so;
  so.api_key = "k";
  start(so, {}, /*eval_delay_ms=*/10);
  auto c = client();
  EXPECT_EQ(c.Get("/props")->status, 401);
  httplib::Headers key{{"Authorization", "Bearer k"}};
  auto r = c.Get("/props", key);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json p = json::parse(r->body);
  EXPECT_EQ(p["total_slots"], 2);
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 96);
  EXPECT_EQ(p["chat_template"], "chatml");
  EXPECT_EQ(p["limits"]["max_stop"], 16);
  std::thread busy([&] {
    auto b = client();
    b.Post("/v1/completions", key, R"({"prompt": "The", "max_tokens": 20, "ignore_eos": true})",
           "application/json");
  });
  ASSERT_TRUE(wait_for([&] { return engine_->counters().running == 1; }, 3000));
  r = c.Get("/slots", key);
  ASSERT_TRUE(r);
  json s = json::parse(r->body);
  ASSERT_EQ(s.size(), 2u) << r->body;
  EXPECT_EQ(s[0]["is_processing"].get<bool>() + s[1]["is_processing"].get<bool>(), 1) << r->body;
  const json& held = s[0]["is_processing"].get<bool>() ? s[0] : s[1];
  EXPECT_EQ(held["params"]["n_predict"], 20) << r->body;
  EXPECT_GT(held["n_prompt_tokens"].get<int>(), 0) << r->body;
  busy.join();
}

TEST_F(HttpServerTest, AStreamWhoseClientStopsReadingIsCancelledAtTheUnsentBound) {
  ServerOptions so;
  so.max_unsent_bytes = 16u << 10;
  n_ctx_ = 512;
  start(so);
  // ~480 events of ~400 bytes (5 logprobs each): far more than the bound, the server's send buffer
  // and the client's 4 KiB receive buffer together.
  RawClient stuck(port_, /*rcvbuf=*/4096);
  ASSERT_TRUE(stuck.connected());
  const std::string body =
      R"({"prompt": "The", "max_tokens": 480, "ignore_eos": true, "stream": true, "logprobs": 5})";
  ASSERT_TRUE(stuck.send(post_head("/v1/completions", body.size()) + body));
  ASSERT_TRUE(wait_for([&] { return engine_->counters().requests_cancelled == 1; }, 30000));
  // Cancelled before its 480 tokens, its slot free again; the server counts the drop.
  EngineCounters ec = engine_->counters();
  EXPECT_EQ(ec.running, 0);
  EXPECT_LT(ec.gen_tokens, 480u);
  auto c = client();
  auto met = c.Get("/metrics");
  ASSERT_TRUE(met);
  EXPECT_NE(met->body.find("strata_http_slow_clients_dropped_total 1\n"), std::string::npos) << met->body;
  // Another client is served as usual.
  auto r = c.Post("/v1/completions", R"({"prompt": "The", "max_tokens": 8, "temperature": 0})",
                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], reference("The", 8));
  // The stuck client finds its stream cut off (what the buffers held, then the close; no [DONE]).
  const std::string got = stuck.read(5000);
  EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos);
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
  EXPECT_LT(got.size(), 480u * 300u) << "the whole stream came through";
}

}  // namespace
}  // namespace strata::server
