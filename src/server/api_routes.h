// The routes of `strata serve` (one row each in Api::routes()):
//   POST /v1/completions, /v1/chat/completions   (also without /v1; "stream": true -> SSE;
//        server/completion_job.h)
//   POST /tokenize, /detokenize (also under /v1), /apply-template   (server/text_routes.h)
//   GET  /v1/models (/models), /v1/models/{id}, /health, /metrics (Prometheus text), /props,
//        /slots (llama-server's); /metrics adds the server's own counter of stream clients dropped
//        for not reading (strata_http_slow_clients_dropped_total) to the engine's
// Completions and the text routes run on a worker (they parse and tokenize); the rest on the I/O
// thread. Bad input is a 400 with {"error": {"message", "type", "code"}}; a full queue a 503 with
// Retry-After.
#pragma once

#include <atomic>
#include <optional>
#include <vector>

#include "runtime/engine.h"
#include "server/completion_job.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace strata::server {

struct ServerOptions;
struct Route;

class Api {
 public:
  // Everything passed must outlive the routes.
  Api(Engine& engine, const Tokenizer& tok, std::optional<ChatFormat> chat, const ServerOptions& opts);
  std::vector<Route> routes();
  // A stream's client dropped for not reading (--max-unsent-bytes); /metrics counts them.
  void count_slow_client() { slow_clients_++; }

 private:
  ApiContext ctx_;
  const ServerOptions& opts_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> slow_clients_{0};
};

}  // namespace strata::server
