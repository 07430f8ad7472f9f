// HTTPS (--ssl-key-file / --ssl-cert-file): a self-signed certificate made at test time with the
// openssl CLI; requests over TLS are answered as over plain HTTP (the body limit too), a plain client
// gets no answer, a connection beyond --max-connections a 503 after its handshake, and a missing,
// invalid or mismatched file is a bind() error that names it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "server/http_fixture.h"
#include "server/http_server.h"

namespace strata::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpServerTest;

class HttpTlsTest : public HttpServerTest {
 protected:
  void SetUp() override {
    if (!HttpServer::tls_supported()) GTEST_SKIP() << "strata was built without OpenSSL (libssl-dev)";
    if (std::system("command -v openssl > /dev/null 2>&1") != 0) {
      if (::strata::testing::running_in_ci()) FAIL() << "the openssl CLI is needed (apt install openssl)";
      GTEST_SKIP() << "no openssl CLI to make a test certificate (apt install openssl)";
    }
    dir_ = fs::temp_directory_path() / ("strata_tls_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    key_ = (dir_ / "key.pem").string();
    cert_ = (dir_ / "cert.pem").string();
    other_key_ = (dir_ / "other.pem").string();
    const std::string mk = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout " +
                           key_ + " -out " + cert_ + " > /dev/null 2>&1 && openssl genrsa -out " +
                           other_key_ + " 2048 > /dev/null 2>&1";
    ASSERT_EQ(std::system(mk.c_str()), 0) << mk;
  }
  void TearDown() override {
    HttpServerTest::TearDown();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  // The bind() error for these files.
  std::string bind_error(const std::string& key, const std::string& cert) {
    ServerOptions so;
    so.port = 0;
    so.ssl_key_file = key;
    so.ssl_cert_file = cert;
    EngineOptions eo;
    eo.n_slots = 1;
    auto e = Engine::create(
        *model_, [](int n_batch) { return model_->new_session({.n_ctx = 32, .n_batch = n_batch}); },
        &model_->tokenizer(), model_->n_vocab(), eo);
    EXPECT_TRUE(e.ok());
    HttpServer s(**e, model_->tokenizer(), ChatFormat::chatml, so);
    auto port = s.bind();
    EXPECT_FALSE(port.ok());
    return port.ok() ? "" : port.message();
  }
  fs::path dir_;
  std::string key_, cert_, other_key_;
};

TEST_F(HttpTlsTest, AnswersOverTls) {
  ServerOptions so;
  so.ssl_key_file = key_;
  so.ssl_cert_file = cert_;
  so.max_body_bytes = 4096;
  start(so);
  httplib::SSLClient c("127.0.0.1", port_);
  c.enable_server_certificate_verification(false);  // self-signed
  c.set_read_timeout(120, 0);
  auto h = c.Get("/health");
  ASSERT_TRUE(h) << httplib::to_string(h.error());
  EXPECT_EQ(h->status, 200);
  auto r = c.Post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 6, "temperature": 0})",
                  "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], reference("In the beginning", 6));
  auto big = c.Post("/tokenize", std::string(64u << 10, 'a'), "application/json");  // over the body limit
  ASSERT_TRUE(big) << httplib::to_string(big.error());
  EXPECT_EQ(big->status, 413);
  // A plain HTTP client gets no answer (the handshake fails), and the server goes on.
  httplib::Client plain("127.0.0.1", port_);
  plain.set_read_timeout(10, 0);
  auto p = plain.Get("/health");
  EXPECT_TRUE(!p || p->status != 200);
  auto again = c.Get("/health");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}

TEST_F(HttpTlsTest, BeyondMaxConnectionsIsA503AfterTheHandshake) {
  ServerOptions so;
  so.ssl_key_file = key_;
  so.ssl_cert_file = cert_;
  so.max_connections = 1;
  start(so);
  httplib::SSLClient held("127.0.0.1", port_);  // keeps its connection open after the answer
  held.enable_server_certificate_verification(false);
  held.set_keep_alive(true);
  auto first = held.Get("/health");
  ASSERT_TRUE(first) << httplib::to_string(first.error());
  EXPECT_EQ(first->status, 200);
  httplib::SSLClient c("127.0.0.1", port_);
  c.enable_server_certificate_verification(false);
  auto r = c.Get("/health");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_NE(r->body.find("--max-connections"), std::string::npos) << r->body;
}

// A non-streamed request over TLS whose client gives up (read timeout: it closes the connection,
// with a TLS close_notify first) is cancelled, as over plain HTTP.
TEST_F(HttpTlsTest, HangUpCancelsTheRequest) {
  ServerOptions so;
  so.ssl_key_file = key_;
  so.ssl_cert_file = cert_;
  start(so, {}, /*eval_delay_ms=*/10);  // 90 tokens take > 900 ms: the hang-up comes first
  httplib::SSLClient c("127.0.0.1", port_);
  c.enable_server_certificate_verification(false);
  c.set_read_timeout(0, 200000);
  auto r = c.Post("/v1/completions",
                  R"({"prompt": "The", "max_tokens": 90, "temperature": 0, "ignore_eos": true})",
                  "application/json");
  EXPECT_FALSE(r);
  EXPECT_TRUE(testing::wait_for([&] { return engine_->counters().requests_cancelled == 1; }, 20000));
  EXPECT_EQ(engine_->counters().requests_ok, 0u);
}

// -to bounds the handshake as it bounds a plain request's header: a client that connects and sends
// nothing is closed.
TEST_F(HttpTlsTest, SilentClientIsClosedAfterTheTimeout) {
  ServerOptions so;
  so.ssl_key_file = key_;
  so.ssl_cert_file = cert_;
  so.timeout_s = 0.3;
  start(so);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port_));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  pollfd p{fd, POLLIN, 0};
  const int ready = ::poll(&p, 1, 30000);  // the server's close makes the socket readable (EOF)
  char c = 0;
  const ssize_t n = ready > 0 ? ::recv(fd, &c, 1, 0) : -1;
  ::close(fd);
  EXPECT_EQ(ready, 1);
  EXPECT_EQ(n, 0) << "the server should close a connection that never starts its handshake";
}

TEST_F(HttpTlsTest, BadFilesAreErrorsNamingThem) {
  const std::string missing = (dir_ / "nope.pem").string(), junk = (dir_ / "junk.pem").string();
  std::ofstream(junk) << "not a PEM file\n";
  std::string e = bind_error(key_, missing);
  EXPECT_NE(e.find("--ssl-cert-file " + missing), std::string::npos) << e;
  e = bind_error(missing, cert_);
  EXPECT_NE(e.find("--ssl-key-file " + missing), std::string::npos) << e;
  e = bind_error(key_, junk);
  EXPECT_NE(e.find("--ssl-cert-file " + junk), std::string::npos) << e;
  e = bind_error(junk, cert_);
  EXPECT_NE(e.find("--ssl-key-file " + junk), std::string::npos) << e;
  e = bind_error(other_key_, cert_);
  EXPECT_NE(e.find("--ssl-key-file " + other_key_), std::string::npos) << e;
  e = bind_error(key_, "");
  EXPECT_NE(e.find("both --ssl-key-file and --ssl-cert-file"), std::string::npos) << e;
}

}  // namespace
}  // namespace strata::server
