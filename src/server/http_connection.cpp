#include "server/http_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <sstream>
#include <strings.h>

#include "base/clock.h"
#include "server/openai_api.h"

namespace strata::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr uint32_t kMaxHeaderBytes = 64u << 10;
constexpr size_t kMaxDrainBytes = 1u << 20;  // read (and dropped) after a refusal, before closing
// An open stream's socket send buffer at most (SSE is a few KB per second: this is plenty).
constexpr size_t kMaxStreamSndbuf = 256u << 10;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

std::string chunk(const std::string& data) {
  if (data.empty()) return {};
  char head[24];
  std::snprintf(head, sizeof head, "%zx\r\n", data.size());
  return head + data + "\r\n";
}

std::string serialize(const HttpResponse& r, bool keep_alive, const HttpHeaders& extra) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
  res.set(http::field::server, "strata");
  if (!r.content_type.empty()) res.set(http::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) res.set(k, v);
  for (const auto& [k, v] : extra) res.set(k, v);
  res.keep_alive(keep_alive);
  res.body() = r.body;
  res.prepare_payload();
  std::ostringstream os;
  os << res;
  return os.str();
}

}  // namespace

HttpResponse json_response(int status, const nlohmann::json& body) {
  return HttpResponse{status,
                      "application/json; charset=utf-8",
                      body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                      {}};
}

HttpResponse error_response(int status, const std::string& message) {
  return json_response(status, error_body(message, status));
}

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  return {};
}

// --- Exchange ---------------------------------------------------------------------------------

Exchange::Exchange(HttpRequest req, std::shared_ptr<Connection> conn)
    : req_(std::move(req)), conn_(std::move(conn)) {}

std::shared_ptr<Connection> Exchange::connection() const {
  std::lock_guard<std::mutex> lk(mu_);
  return conn_;
}

bool Exchange::open() const {
  std::lock_guard<std::mutex> lk(mu_);
  return conn_ != nullptr;
}

void Exchange::close() {
  std::lock_guard<std::mutex> lk(mu_);
  conn_.reset();
}

bool Exchange::post(std::function<void()> f) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!conn_) return false;
  // The connection is alive while the exchange is open, and the I/O loop with it.
  net::post(conn_->executor(), [self = shared_from_this(), f = std::move(f)] {
    if (self->open()) f();
  });
  return true;
}

void Exchange::respond(HttpResponse r) {
  post([self = shared_from_this(), r = std::move(r)]() mutable {
    if (auto c = self->connection()) c->respond(std::move(r));
  });
}

void Exchange::begin_stream(std::string content_type, std::string final_event) {
  post([self = shared_from_this(), ct = std::move(content_type), fe = std::move(final_event)]() mutable {
    if (auto c = self->connection()) c->begin_stream(ct, std::move(fe));
  });
}

void Exchange::write(std::string data) {
  post([self = shared_from_this(), d = std::move(data)] {
    if (auto c = self->connection()) c->write(d);
  });
}

void Exchange::end_stream() {
  post([self = shared_from_this()] {
    if (auto c = self->connection()) c->end_stream();
  });
}

// --- Connection -------------------------------------------------------------------------------

namespace {

Connection::Stream make_stream(tcp::socket s, TlsContext* tls) {
#ifdef STRATA_HAVE_OPENSSL
  if (tls) return Connection::Stream(std::in_place_index<1>, beast::tcp_stream(std::move(s)), *tls);
#endif
  return Connection::Stream(std::in_place_index<0>, std::move(s));
}

}  // namespace

Connection::Connection(tcp::socket s, ConnectionHost& host, double t_accept, TlsContext* tls)
    : stream_(make_stream(std::move(s), tls)),
      hangup_timer_(tcp_layer().get_executor()),
      buf_(kMaxHeaderBytes * 4),
      host_(host),
      t_accept_(t_accept) {}

beast::tcp_stream& Connection::tcp_layer() {
  return std::visit([](auto& s) -> beast::tcp_stream& { return beast::get_lowest_layer(s); }, stream_);
}

Connection::~Connection() {
  if (ex_) ex_->close();
  host_.closed(this);
}

void Connection::start(std::optional<HttpResponse> refusal) {
  refusal_ = std::move(refusal);
  beast::error_code ec;
  tcp_layer().socket().set_option(tcp::no_delay(true), ec);  // SSE: a token's write must not wait for an ACK
#ifdef STRATA_HAVE_OPENSSL
  if (auto* tls = std::get_if<1>(&stream_)) {
    tcp_layer().expires_after(seconds(host_.timeout_s()));
    tls->async_handshake(net::ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->close();  // not TLS, a bad certificate for the client, a timeout: nothing to say
      self->begin();
    });
    return;
  }
#endif
  begin();
}

void Connection::begin() {
  if (!refusal_) return read_header();
  keep_alive_ = false;
  state_ = State::handling;
  send(serialize(*refusal_, false, {}), Then::close);
}

void Connection::read_header() {
  state_ = State::reading;
  ++gen_;
  extra_.clear();
  parser_.emplace();
  parser_->header_limit(kMaxHeaderBytes);
  parser_->body_limit(host_.max_body_bytes());
  tcp_layer().expires_after(seconds(host_.timeout_s()));  // the idle wait and the whole header
  std::visit(
      [this](auto& s) {
        http::async_read_header(s, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
          self->on_header(ec);
        });
      },
      stream_);
}

void Connection::on_header(beast::error_code ec) {
  if (state_ != State::reading) return;
  if (ec == http::error::body_limit) return refuse(413, "request body is larger than the server's limit");
  if (ec == http::error::header_limit) return refuse(431, "request header is larger than the server's limit");
  if (ec) {
    // A clean close, a timeout or a dead socket: nothing to answer. A malformed request: a 400.
    const bool parse_error = ec.category() == http::make_error_code(http::error::bad_target).category() &&
                             ec != http::error::end_of_stream && ec != http::error::partial_message;
    if (!parse_error) return close();
    return refuse(400, "malformed HTTP request: " + ec.message());
  }
  const auto& h = parser_->get();
  HttpRequest& head = head_;
  head = HttpRequest{};
  head.method = std::string(h.method_string());
  const std::string target(h.target());
  const size_t q = target.find('?');
  head.path = target.substr(0, q);
  if (q != std::string::npos) head.query = target.substr(q + 1);
  for (const auto& f : h) head.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  head.t_arrival = first_ ? t_accept_ : now_seconds();
  first_ = false;
  keep_alive_ = h.keep_alive();
  extra_ = host_.response_headers(head);
  HttpResponse refusal;
  route_ = host_.route(head, &refusal);
  if (!route_) {
    // Answered without reading the body: the connection cannot be reused.
    keep_alive_ = false;
    state_ = State::handling;
    send(serialize(refusal, false, extra_), Then::close);
    return;
  }
  if (beast::iequals(h[http::field::expect], "100-continue"))
    send("HTTP/1.1 100 Continue\r\n\r\n", Then::nothing);
  tcp_layer().expires_after(seconds(host_.timeout_s()));  // the whole body
  std::visit(
      [this](auto& s) {
        http::async_read(s, buf_, *parser_,
                         [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
      },
      stream_);
}

void Connection::on_body(beast::error_code ec) {
  if (state_ != State::reading) return;
  if (ec == http::error::body_limit) return refuse(413, "request body is larger than the server's limit");
  if (ec) return close();
  tcp_layer().expires_never();
  head_.body = std::move(parser_->get().body());
  parser_.reset();
  ex_ = std::make_shared<Exchange>(std::move(head_), shared_from_this());
  state_ = State::handling;
  watch_hangup();
  host_.run(*route_, ex_);
}

void Connection::refuse(int status, const std::string& message) {
  keep_alive_ = false;
  state_ = State::handling;
  HttpResponse r = error_response(status, message);
  send(serialize(r, false, extra_), Then::close);
}

// A readable socket while a handler runs: the client hung up (EOF / reset / its FIN behind unread
// bytes), or sent its next request early (pipelining; then the watch ends and a hang-up shows at the
// next write). Over TLS a client's close_notify arrives as bytes just before its FIN, so unread bytes
// there are looked at again until the exchange ends.
void Connection::watch_hangup() {
  tcp_layer().socket().async_wait(
      tcp::socket::wait_read, [self = shared_from_this(), gen = gen_](beast::error_code ec) {
        if (gen != self->gen_ || (self->state_ != State::handling && self->state_ != State::streaming))
          return;
        if (ec) {
          if (ec != net::error::operation_aborted) self->client_gone();
          return;
        }
        self->check_hangup();
      });
}

void Connection::check_hangup() {
  const int fd = tcp_layer().socket().native_handle();
  pollfd p{fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) return client_gone();
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return client_gone();
  if (n < 0) return watch_hangup();
  if (stream_.index() == 0) return;  // plain: a pipelined request
  hangup_timer_.expires_after(std::chrono::milliseconds(100));
  hangup_timer_.async_wait([self = shared_from_this(), gen = gen_](beast::error_code ec) {
    if (!ec && gen == self->gen_ && (self->state_ == State::handling || self->state_ == State::streaming))
      self->check_hangup();
  });
}

void Connection::client_gone() {
  const auto self = shared_from_this();
  if (ex_) ex_->close();
  close();
}

void Connection::respond(HttpResponse r) {
  if (state_ != State::handling) return;
  end_exchange();
  const bool keep = keep_alive_ && !stopping_;
  send(serialize(r, keep, extra_), keep ? Then::next_request : Then::close);
}

void Connection::begin_stream(const std::string& content_type, std::string final_event) {
  if (state_ != State::handling) return;
  state_ = State::streaming;
  final_event_ = std::move(final_event);
  http::response<http::empty_body> res{http::status::ok, 11};
  res.set(http::field::server, "strata");
  res.set(http::field::content_type, content_type);
  res.set(http::field::cache_control, "no-cache");
  for (const auto& [k, v] : extra_) res.set(k, v);
  res.keep_alive(keep_alive_);
  res.chunked(true);
  // The kernel's share of the unsent bytes is bounded too (its autotuning would let it grow to MBs).
  beast::error_code ec;
  tcp_layer().socket().set_option(net::socket_base::send_buffer_size(
                                      static_cast<int>(std::min(host_.max_unsent_bytes(), kMaxStreamSndbuf))),
                                  ec);
  std::ostringstream os;
  os << res.base();
  send(os.str(), Then::nothing);
}

void Connection::write(const std::string& data) {
  if (state_ == State::streaming) send(chunk(data), Then::nothing);
}

void Connection::end_stream() {
  if (state_ != State::streaming) return;
  end_exchange();
  const bool keep = keep_alive_ && !stopping_;
  send("0\r\n\r\n", keep ? Then::next_request : Then::close);
}

void Connection::end_exchange() {
  if (ex_) ex_->close();
  ex_.reset();
  final_event_.clear();
  ++gen_;  // the hang-up watch of this request is over (it completes when the socket is next readable)
}

void Connection::shutdown() {
  const auto self = shared_from_this();  // closing the exchange may drop the last other owner
  stopping_ = true;
  switch (state_) {
    case State::reading:
      return close();
    case State::handling:
      if (!ex_) return;  // already answered: the answer is being written, then the connection closes
      end_exchange();
      send(serialize(error_response(503, "server shutting down"), false, extra_), Then::close);
      return;
    case State::streaming: {
      std::string last = chunk(final_event_);
      end_exchange();
      send(last + "0\r\n\r\n", Then::close);
      return;
    }
    case State::closed:
      return;
  }
}

void Connection::abandon() {
  const auto self = shared_from_this();
  if (ex_) ex_->close();
  ex_.reset();
  close();
}

void Connection::send(std::string bytes, Then then) {
  out_ += bytes;
  if (state_ == State::streaming && out_.size() + inflight_.size() > host_.max_unsent_bytes()) {
    host_.overflowed();  // a client that does not read its stream: its bytes must not pile up here
    return client_gone();
  }
  if (then != Then::nothing) then_ = then;
  flush();
}

void Connection::flush() {
  if (writing_ || state_ == State::closed) return;
  if (out_.empty()) {
    const Then t = then_;
    then_ = Then::nothing;
    if (t == Then::next_request) return read_header();
    if (t == Then::close) return linger();
    return;
  }
  writing_ = true;
  inflight_.swap(out_);
  out_.clear();
  tcp_layer().expires_after(seconds(host_.timeout_s()));
  std::visit(
      [this](auto& s) {
        net::async_write(s, net::buffer(inflight_),
                         [self = shared_from_this()](beast::error_code ec, size_t) { self->on_flushed(ec); });
      },
      stream_);
}

void Connection::on_flushed(beast::error_code ec) {
  writing_ = false;
  inflight_.clear();
  if (ec) return client_gone();
  if (state_ == State::handling || state_ == State::streaming) tcp_layer().expires_never();
  flush();
}

// After a last answer: stop sending, read (and drop) what the client still sends for a moment so
// that closing does not reset the connection under the answer, then close.
void Connection::linger() {
  state_ = State::closed;
  beast::error_code ec;
  tcp_layer().socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  tcp_layer().expires_after(std::chrono::seconds(1));
  drain();
}

void Connection::drain() {
  buf_.consume(buf_.size());
  tcp_layer().async_read_some(buf_.prepare(64u << 10),  // below TLS: the bytes are dropped
                              [self = shared_from_this()](beast::error_code ec, size_t n) {
                                self->drained_ += n;
                                if (ec || self->drained_ > kMaxDrainBytes) return self->close();
                                self->drain();
                              });
}

void Connection::close() {
  state_ = State::closed;
  hangup_timer_.cancel();
  beast::error_code ec;
  tcp_layer().socket().shutdown(tcp::socket::shutdown_both, ec);
  tcp_layer().close();
}

}  // namespace strata::server
