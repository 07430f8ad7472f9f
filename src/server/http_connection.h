// One client connection of the HTTP server, driven by completions on the server's I/O thread (a
// connection costs a socket and a few buffers, never a thread). It reads a request (Boost.Beast's
// parser: header and body limits hold for Content-Length and chunked bodies alike, refused as the
// bytes arrive), asks its host for the route, hands an Exchange to the handler, and writes what the
// handler sends back — one response, or a chunked stream. While a handler runs, a hang-up of the
// client closes the exchange (which cancels its engine request). Keep-alive requests follow one
// another; the same timeout bounds a request's header, its body, the idle time between requests
// and every write; an open stream's unsent bytes are bounded (a client that stops reading is dropped
// once they pass the host's max_unsent_bytes, its request cancelled; the socket's kernel send buffer
// is set to at most that, 256 KiB, when the stream begins). Over TLS (a TlsContext given) the connection
// first does the server handshake, bounded by the same timeout, and then the same exchange of requests.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "server/http_exchange.h"
#include "server/tls_context.h"

#ifdef STRATA_HAVE_OPENSSL
#include <boost/beast/ssl/ssl_stream.hpp>
#endif

namespace strata::server {

struct Route;

// What a connection needs from its server.
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  virtual double timeout_s() const = 0;
  virtual size_t max_body_bytes() const = 0;
  // Bytes an open stream may have waiting for its client (queued and being written); beyond, the
  // client is taken as gone: its exchange closes (cancelling the engine request) and so does the
  // connection, after overflowed() counts it.
  virtual size_t max_unsent_bytes() const = 0;
  virtual void overflowed() = 0;
  // The route for a request's head; nullptr with *refusal filled (404, 401) when there is none.
  virtual const Route* route(const HttpRequest& head, HttpResponse* refusal) const = 0;
  // Headers every answer to this request carries (CORS), refusals and streams included.
  virtual HttpHeaders response_headers(const HttpRequest& head) const = 0;
  virtual void run(const Route& r, const std::shared_ptr<Exchange>& ex) = 0;
  virtual void closed(Connection* c) = 0;  // from the connection's destructor
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
#ifdef STRATA_HAVE_OPENSSL
  using Stream = std::variant<boost::beast::tcp_stream, boost::beast::ssl_stream<boost::beast::tcp_stream>>;
#else
  using Stream = std::variant<boost::beast::tcp_stream>;
#endif
  // tls: null for plain HTTP, else the server's TLS context (outlives the connection).
  Connection(boost::asio::ip::tcp::socket s, ConnectionHost& host, double t_accept,
             TlsContext* tls = nullptr);
  ~Connection();
  // refusal: answered to the first request without reading it (a TLS connection beyond
  // --max-connections is refused this way, after the handshake).
  void start(std::optional<HttpResponse> refusal = std::nullopt);
  // The server stops: idle and reading connections close, a handler's pending answer becomes a
  // 503, an open stream gets its final event and ends.
  void shutdown();
  void abandon();  // the I/O loop ended: drop everything now

  boost::asio::any_io_executor executor() {
    return tcp_layer().get_executor();
  }
  // From the exchange, on the I/O thread:
  void respond(HttpResponse r);
  void begin_stream(const std::string& content_type, std::string final_event);
  void write(const std::string& data);
  void end_stream();

 private:
  enum class State { reading, handling, streaming, closed };
  enum class Then { nothing, next_request, close };
  boost::beast::tcp_stream& tcp_layer();  // the TCP layer (timeouts, the socket)
  void begin();                           // after the handshake: the first request (or the refusal)
  void read_header();
  void on_header(boost::beast::error_code ec);
  void on_body(boost::beast::error_code ec);
  void refuse(int status, const std::string& message);  // answer, then drain a little and close
  void watch_hangup();
  void check_hangup();
  void client_gone();
  void send(std::string bytes, Then then);
  void flush();
  void on_flushed(boost::beast::error_code ec);
  void end_exchange();
  void linger();
  void drain();
  void close();

  Stream stream_;
  boost::asio::steady_timer hangup_timer_;  // TLS: looks again at unread bytes while a handler runs
  std::optional<HttpResponse> refusal_;
  boost::beast::flat_buffer buf_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  ConnectionHost& host_;
  const Route* route_ = nullptr;
  HttpRequest head_;   // the request being read
  HttpHeaders extra_;  // the host's headers for the answers to it
  std::shared_ptr<Exchange> ex_;
  State state_ = State::reading;
  bool keep_alive_ = true;
  bool stopping_ = false;
  bool first_ = true;
  double t_accept_ = 0;
  uint64_t gen_ = 0;            // requests read so far: a hang-up watch of an earlier one is ignored
  std::string out_, inflight_;  // bytes to write, and those being written
  bool writing_ = false;
  Then then_ = Then::nothing;
  std::string final_event_;  // an open stream's last words if the server stops
  size_t drained_ = 0;
};

}  // namespace strata::server
