// HttpServer: the HTTP face of `strata serve`, event-driven on Boost.Beast / Asio. One I/O thread
// runs every connection (server/http_connection.h: a connection costs no thread; header, body,
// idle and write timeouts); handlers that parse and tokenize run on a small fixed worker pool, and
// a request's tokens come back from the engine's scheduler as posted events. Routes are a table
// (server/api_routes.h: the OpenAI routes, /tokenize, /detokenize, /apply-template, /health,
// /metrics, /props, /slots; server/stats_feed.h: the dashboard at /, its /v1/strata/stats and
// /v1/strata/events); a request with no route is a 404, one without the API key a 401, both
// with {"error": {...}} bodies. With cors_origins, an allowed origin's answers (errors and streams
// included) carry Access-Control-Allow-Origin, and a preflight (OPTIONS) is a 204 without the key.
//
// Limits: --max-connections (beyond: a 503 and the connection closed; RLIMIT_NOFILE is raised to
// its hard limit, and the bound lowered to what it allows), the body size (Content-Length or
// chunked, refused as the bytes arrive: 413), exclusive bind (no SO_REUSEPORT: a busy port is an
// error naming host:port), the bytes queued for a stream's client that stops reading
// (--max-unsent-bytes: beyond, the request is cancelled and the connection closed). With
// ssl_key_file / ssl_cert_file every connection is TLS (a bad file is a bind() error naming it;
// beyond --max-connections the 503 comes after the handshake). stop(): no new connections; idle
// ones close, a pending answer becomes a 503, an open stream ends with its final event; after
// --shutdown-timeout the rest are dropped.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/profile.h"
#include "runtime/engine.h"
#include "server/http_exchange.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace strata {
class ChatJinja;  // text/chat_template_jinja.h
}  // namespace strata

namespace strata::server {
struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (tests)
  std::string model_name = "strata";  // reported by /v1/models and in every response
  std::string api_key;                // non-empty: requests need "Authorization: Bearer KEY"
  size_t max_body_bytes = 16u << 20;  // larger request bodies are refused (413), chunked ones too
  double timeout_s = 600;             // -to: a request's header, its body, idle keep-alive, each write
  int max_connections = 4096;         // open client connections; beyond, new ones get a 503
  double shutdown_timeout_s = 5;      // stop(): open streams end within this
  int max_stop = 16;                  // stop strings per request at most (400 beyond)
  size_t max_stop_bytes = 256;        // bytes of one stop string at most
  // --max-unsent-bytes: bytes of an open stream (SSE) waiting for a client that does not read them;
  // beyond, its request is cancelled and the connection closed (counted in /metrics).
  size_t max_unsent_bytes = 2u << 20;
  int workers = 2;  // threads that parse and tokenize requests
  // Browser origins allowed to call the API (CORS; "*": any); empty: no CORS headers.
  std::vector<std::string> cors_origins;
  // Both set: HTTPS only (PEM files; server/tls_context.h), with the same limits and timeouts.
  std::string ssl_key_file, ssl_cert_file;
  Profile profile = Profile::accurate;  // --profile: a request without "profile" gets this one
  // --jinja: chat prompts (and /apply-template, /tokenize's messages) are the model's own template
  // rendered by strata's Jinja engine; the chat format then only chooses the tool-call syntax.
  std::shared_ptr<const ChatJinja> chat_jinja;
};

// One row of the route table. Handlers answer through the exchange (any thread, once).
struct Route {
  std::string method;      // "GET", "POST"
  std::string path;        // the whole path, or with prefix its start (the rest: a parameter)
  bool prefix = false;     // true: paths that start with `path` and go on (/v1/models/{id})
  bool needs_key = true;   // false: open without the API key (/health, /metrics)
  bool on_worker = false;  // true: runs on the worker pool (parsing, tokenizing); else on the I/O thread
  std::function<void(const std::shared_ptr<Exchange>&)> handle;
};

class HttpServer {
 public:
  // chat: the format /v1/chat/completions renders messages with (absent: chat requests are a 400).
  HttpServer(Engine& engine, const Tokenizer& tok, std::optional<ChatFormat> chat, ServerOptions opts);
  ~HttpServer();

  // Binds host:port (exclusively); returns the port (the chosen one when port was 0).
  Result<int> bind();
  void run();   // serves until stop() and the shutdown are over; call after bind()
  void stop();  // any thread
  // After bind(): the connection bound in force, and a note when RLIMIT_NOFILE lowered it.
  int max_connections() const;
  const std::string& note() const;
  static bool tls_supported();  // built with OpenSSL

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server
