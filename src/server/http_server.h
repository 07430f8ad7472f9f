// HttpServer: the HTTP face of `strata serve` (cpp-httplib), OpenAI-compatible:
//   POST /v1/completions, /v1/chat/completions   (also without /v1; "stream": true -> SSE)
//   POST /tokenize, /detokenize, /apply-template (server/text_routes.h)
//   GET  /v1/models, /v1/models/{id}, /health, /metrics (Prometheus text)
// With cors_origins, browsers of those origins may call it (OPTIONS preflights need no API key).
// Requests go to the Engine's slots; a client that disconnects cancels its request. Bad input
// (invalid JSON, unsupported fields, a prompt longer than a slot's context, an unknown chat role)
// is a 400 with {"error": {"message", "type", "code"}}; a full queue is a 503.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/engine.h"
#include "server/completion_job.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace httplib {
class Server;
}

namespace strata::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (tests)
  std::string model_name = "strata";  // reported by /v1/models and in every response
  std::string api_key;                // non-empty: requests need "Authorization: Bearer KEY"
  size_t max_body_bytes = 16u << 20;  // larger request bodies are refused (413)
  // Browser origins allowed to call the API (CORS; "*": any); empty: no CORS headers.
  std::vector<std::string> cors_origins;
};

class HttpServer {
 public:
  // chat: the format /v1/chat/completions renders messages with (absent: chat requests are a 400).
  HttpServer(Engine& engine, const Tokenizer& tok, std::optional<ChatFormat> chat, ServerOptions opts);
  ~HttpServer();

  Result<int> bind();  // binds host:port; returns the port (the chosen one when port was 0)
  void run();          // serves until stop(); call after bind()
  void stop();

 private:
  void routes();
  ApiContext api_context() { return ApiContext{engine_, tok_, chat_, opts_.model_name}; }
  Engine& engine_;
  const Tokenizer& tok_;
  std::optional<ChatFormat> chat_;
  ServerOptions opts_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace strata::server
