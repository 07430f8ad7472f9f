// One HTTP request and the way back to its client, as a route handler sees them (the transport:
// server/http_connection.h). A handler answers once: respond() with a whole response, or
// begin_stream() / write()... / end_stream() for a chunked one (SSE). Every method may be called
// from any thread (a worker, the engine's scheduler): the work is posted to the server's I/O
// thread and runs there in call order. Once the exchange is closed — answered, the client gone, or
// the server stopping — calls do nothing and post() returns false: an engine sink returns that to
// cancel its request.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST"
  std::string path;    // without the query
  std::string query;   // after '?', undecoded
  HttpHeaders headers;
  std::string body;
  double t_arrival = 0;  // now_seconds() when the request reached the server (accept / its header)
  // The value of header `name` (case-insensitive), "" when absent.
  std::string header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json; charset=utf-8";
  std::string body;
  HttpHeaders headers;  // extra headers (e.g. Retry-After)
};

// A JSON body (invalid UTF-8 in its strings becomes U+FFFD: model text and request paths are bytes).
HttpResponse json_response(int status, const nlohmann::json& body);
// {"error": {"message", "type", "code"}} with that status.
HttpResponse error_response(int status, const std::string& message);

class Connection;

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(HttpRequest req, std::shared_ptr<Connection> conn);
  const HttpRequest& request() const { return req_; }

  // Runs f on the I/O thread unless the exchange is closed by then; false when it already is.
  bool post(std::function<void()> f);
  void respond(HttpResponse r);
  // A chunked 200 response; final_event is written, and the stream ended, if the server stops
  // while the stream is open (e.g. an SSE error event and "data: [DONE]").
  void begin_stream(std::string content_type, std::string final_event);
  void write(std::string data);
  void end_stream();
  bool open() const;

  // The transport's side (I/O thread only): no call reaches the connection after close().
  void close();

 private:
  std::shared_ptr<Connection> connection() const;
  HttpRequest req_;
  mutable std::mutex mu_;
  std::shared_ptr<Connection> conn_;  // null once closed (breaks the connection <-> exchange cycle)
};

}  // namespace strata::server
