#include "server/http_server.h"

#include <sys/resource.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <unordered_set>

#include "base/clock.h"
#include "server/api_routes.h"
#include "server/http_connection.h"
#include "server/openai_api.h"
#include "server/stats_feed.h"
#include "server/text_routes.h"
#include "server/tls_context.h"

namespace strata::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

constexpr int kReservedFds = 64;  // files the process needs besides its client connections

// A CORS preflight (OPTIONS of any path): 204 without the API key; an allowed origin (its
// Access-Control-Allow-Origin comes from response_headers) learns the methods and headers it may use.
Route preflight_route(const std::vector<std::string>& origins) {
  auto handle = [&origins](const std::shared_ptr<Exchange>& ex) {
    HttpResponse r{204, "", "", {}};
    const HttpRequest& req = ex->request();
    if (!cors_allow_origin(origins, req.header("Origin")).empty()) {
      const std::string want = req.header("Access-Control-Request-Headers");
      r.headers = {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                   {"Access-Control-Allow-Headers", want.empty() ? "Authorization, Content-Type" : want},
                   {"Access-Control-Max-Age", "600"}};
    }
    ex->respond(std::move(r));
  };
  return Route{"OPTIONS", "", false, false, false, handle};
}

}  // namespace

class HttpServer::Impl : public ConnectionHost {
 public:
  Impl(Engine& engine, const Tokenizer& tok, std::optional<ChatFormat> chat, ServerOptions opts)
      : opts_(std::move(opts)),
        api_(engine, tok, chat, opts_),
        routes_(api_.routes()),
        preflight_(preflight_route(opts_.cors_origins)),
        workers_(static_cast<size_t>(std::max(1, opts_.workers))),
        acceptor_(ioc_),
        shutdown_timer_(ioc_),
        retry_timer_(ioc_),
        feed_(ioc_, engine, opts_.model_name) {
    for (Route& r : feed_.routes()) routes_.push_back(std::move(r));
  }

  ~Impl() override { workers_.join(); }

  Result<int> bind();
  void run();
  void stop() {
    net::post(ioc_, [this] { begin_shutdown(); });
  }

  // ConnectionHost
  double timeout_s() const override { return opts_.timeout_s; }
  size_t max_body_bytes() const override { return opts_.max_body_bytes; }
  size_t max_unsent_bytes() const override { return opts_.max_unsent_bytes; }
  void overflowed() override { api_.count_slow_client(); }
  const Route* route(const HttpRequest& head, HttpResponse* refusal) const override;
  HttpHeaders response_headers(const HttpRequest& head) const override;
  void run(const Route& r, const std::shared_ptr<Exchange>& ex) override;
  void closed(Connection* c) override {
    conns_.erase(c);
    if (stopping_ && running_ && conns_.empty()) ioc_.stop();
  }

  ServerOptions opts_;
  int max_conns_ = 0;
  std::string note_;

 private:
  void accept();
  void refuse(tcp::socket s);
  HttpResponse busy() const;
  void begin_shutdown();

  Api api_;
  std::vector<Route> routes_;
  Route preflight_;                        // OPTIONS of any path, with cors_origins
  std::unordered_set<Connection*> conns_;  // I/O thread only; declared before ioc_: outlives its handlers
  std::unique_ptr<TlsContext> tls_;        // null: plain HTTP; before ioc_: outlives the connections
  net::thread_pool workers_;
  net::io_context ioc_{1};
  tcp::acceptor acceptor_;
  net::steady_timer shutdown_timer_, retry_timer_;
  StatsFeed feed_;  // the dashboard and its event stream
  bool stopping_ = false, running_ = false;
};

Result<int> HttpServer::Impl::bind() {
  if (opts_.port < 0 || opts_.port > 65535) return err("--port %d must be in [0, 65535]", opts_.port);
  if (opts_.max_connections < 1) return err("--max-connections %d must be >= 1", opts_.max_connections);
  if (!(opts_.timeout_s > 0)) return err("--timeout %g must be > 0 seconds", opts_.timeout_s);
  if (opts_.max_unsent_bytes < 1) return err("--max-unsent-bytes must be >= 1");
  if (!(opts_.shutdown_timeout_s >= 0))
    return err("--shutdown-timeout %g must be >= 0", opts_.shutdown_timeout_s);
  // Every connection is a file: raise the soft limit to the hard one, and hold the bound to it.
  rlimit rl{};
  max_conns_ = opts_.max_connections;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
      getrlimit(RLIMIT_NOFILE, &rl);
    }
    const auto room = static_cast<long long>(rl.rlim_cur) - kReservedFds;
    if (rl.rlim_cur != RLIM_INFINITY && room < max_conns_) {
      max_conns_ = static_cast<int>(std::max(1LL, room));
      note_ = "--max-connections " + std::to_string(opts_.max_connections) + " lowered to " +
              std::to_string(max_conns_) + ": RLIMIT_NOFILE allows " + std::to_string(rl.rlim_cur) +
              " open files";
    }
  }
  if (!opts_.ssl_key_file.empty() || !opts_.ssl_cert_file.empty()) {
    auto tls = make_tls_context(opts_.ssl_key_file, opts_.ssl_cert_file);
    if (!tls.ok()) return tls.error();
    tls_ = std::move(*tls);
  }
  error_code ec;
  tcp::resolver resolver(ioc_);
  auto eps = resolver.resolve(opts_.host, std::to_string(opts_.port), tcp::resolver::passive, ec);
  if (ec || eps.empty())
    return err("cannot bind %s:%d: %s is not an address or host name (%s)", opts_.host.c_str(), opts_.port,
               opts_.host.c_str(), ec.message().c_str());
  const tcp::endpoint ep = eps.begin()->endpoint();
  acceptor_.open(ep.protocol(), ec);
  // SO_REUSEADDR only (a restart need not wait for TIME_WAIT); never SO_REUSEPORT: two servers on
  // one port would split its traffic.
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    error_code ignored;
    acceptor_.close(ignored);
    return err("cannot bind %s:%d: %s", opts_.host.c_str(), opts_.port, ec.message().c_str());
  }
  return static_cast<int>(acceptor_.local_endpoint().port());
}

void HttpServer::Impl::run() {
  running_ = true;
  accept();
  for (;;) {
    try {
      ioc_.run();
      break;
    } catch (const std::exception& e) {  // a handler's bug must not end the server: log, go on
      std::fprintf(stderr, "strata serve: error on the I/O thread: %s\n", e.what());
    }
  }
  running_ = false;
  // Whatever is left (the shutdown timed out): no exchange may reach a connection from now on.
  const std::vector<Connection*> left(conns_.begin(), conns_.end());
  for (Connection* c : left) c->abandon();
}

void HttpServer::Impl::accept() {
  acceptor_.async_accept([this](error_code ec, tcp::socket s) {
    if (stopping_ || ec == net::error::operation_aborted) return;
    if (ec) {  // out of files (EMFILE) and the like: try again shortly
      retry_timer_.expires_after(std::chrono::milliseconds(50));
      retry_timer_.async_wait([this](error_code e) {
        if (!e && !stopping_) accept();
      });
      return;
    }
    const bool full = static_cast<int>(conns_.size()) >= max_conns_;
    if (full && !tls_) {
      refuse(std::move(s));
    } else {  // over TLS a refusal needs the handshake: the connection answers it, then closes
      auto c = std::make_shared<Connection>(std::move(s), *this, now_seconds(), tls_.get());
      conns_.insert(c.get());
      c->start(full ? std::optional<HttpResponse>(busy()) : std::nullopt);
    }
    accept();
  });
}

// Beyond --max-connections: a 503 that says so, then the socket closes (after reading for at most
// a second what the client sent, so that the close does not reset the answer away).
void HttpServer::Impl::refuse(tcp::socket s) {
  struct Refused {
    tcp::socket sock;
    net::steady_timer timer;
    std::string msg;
    char drain[4096];
  };
  const HttpResponse r = busy();
  auto st = std::make_shared<Refused>(Refused{std::move(s), net::steady_timer(ioc_), {}, {}});
  st->msg = "HTTP/1.1 503 Service Unavailable\r\nServer: strata\r\nContent-Type: " + r.content_type +
            "\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " + std::to_string(r.body.size()) +
            "\r\n\r\n" + r.body;
  net::async_write(st->sock, net::buffer(st->msg), [st](error_code ec, size_t) {
    error_code ignored;
    if (ec) return (void)st->sock.close(ignored);
    st->sock.shutdown(tcp::socket::shutdown_send, ignored);
    st->timer.expires_after(std::chrono::seconds(1));
    st->timer.async_wait([st](error_code) {
      error_code e;
      st->sock.close(e);
    });
    st->sock.async_read_some(net::buffer(st->drain), [st](error_code, size_t) { st->timer.cancel(); });
  });
}

HttpResponse HttpServer::Impl::busy() const {
  HttpResponse r = error_response(
      503, "server busy: " + std::to_string(max_conns_) + " connections are open (--max-connections)");
  r.headers = {{"Retry-After", "1"}};
  return r;
}

void HttpServer::Impl::begin_shutdown() {
  if (stopping_) return;
  stopping_ = true;
  error_code ignored;
  acceptor_.close(ignored);
  retry_timer_.cancel();
  feed_.stop();
  const std::vector<Connection*> open(conns_.begin(), conns_.end());
  for (Connection* c : open) c->shutdown();
  if (conns_.empty()) return ioc_.stop();
  shutdown_timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(opts_.shutdown_timeout_s)));
  shutdown_timer_.async_wait([this](error_code ec) {
    if (!ec) ioc_.stop();
  });
}

const Route* HttpServer::Impl::route(const HttpRequest& head, HttpResponse* refusal) const {
  if (head.method == "OPTIONS" && !opts_.cors_origins.empty()) return &preflight_;
  for (const Route& r : routes_) {
    const bool match =
        r.prefix ? head.path.size() > r.path.size() && head.path.starts_with(r.path) : head.path == r.path;
    if (!match || r.method != head.method) continue;
    if (r.needs_key && !opts_.api_key.empty() && head.header("Authorization") != "Bearer " + opts_.api_key) {
      *refusal = error_response(401, "missing or wrong API key (Authorization: Bearer KEY)");
      return nullptr;
    }
    return &r;
  }
  *refusal = error_response(404, "no route for " + head.method + " " + head.path);
  return nullptr;
}

HttpHeaders HttpServer::Impl::response_headers(const HttpRequest& head) const {
  if (opts_.cors_origins.empty()) return {};
  const std::string allow = cors_allow_origin(opts_.cors_origins, head.header("Origin"));
  if (allow.empty()) return {};
  return {{"Access-Control-Allow-Origin", allow}, {"Vary", "Origin"}};
}

void HttpServer::Impl::run(const Route& r, const std::shared_ptr<Exchange>& ex) {
  auto call = [h = &r.handle, ex] {
    try {
      (*h)(ex);
    } catch (const std::exception& e) {
      ex->respond(error_response(500, std::string("internal error: ") + e.what()));
    } catch (...) {
      ex->respond(error_response(500, "internal error"));
    }
  };
  if (r.on_worker) {
    net::post(workers_, call);
  } else {
    call();
  }
}

HttpServer::HttpServer(Engine& engine, const Tokenizer& tok, std::optional<ChatFormat> chat,
                       ServerOptions opts)
    : impl_(std::make_unique<Impl>(engine, tok, chat, std::move(opts))) {}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind() {
  return impl_->bind();
}

void HttpServer::run() {
  impl_->run();
}

void HttpServer::stop() {
  impl_->stop();
}

int HttpServer::max_connections() const {
  return impl_->max_conns_;
}

const std::string& HttpServer::note() const {
  return impl_->note_;
}

bool HttpServer::tls_supported() {
  return server::tls_supported();
}

}  // namespace strata::server
