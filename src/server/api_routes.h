// The routes of `strata serve` (one row each in Api::routes()):
//   POST /v1/completions, /v1/chat/completions   (also without /v1; "stream": true -> SSE)
//   GET  /v1/models (/models), /health, /metrics (Prometheus text), /props, /slots (llama-server's)
// A completion is parsed and tokenized on a worker, checked against the server's limits (stop
// strings, prompt bytes against what a slot's context can hold, before tokenizing), and submitted
// to the engine; its events come back through the exchange. A client that goes away, or a server
// that stops, cancels the request. Bad input is a 400 with {"error": {"message", "type", "code"}};
// a full queue a 503 with Retry-After.
#pragma once

#include <atomic>
#include <optional>
#include <vector>

#include "runtime/engine.h"
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

  // Bytes one token can stand for at most (the longest piece, at least one UTF-8 character): a
  // prompt longer than n_ctx times this cannot fit a slot, whatever its tokens.
  size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  void completion(const std::shared_ptr<class Exchange>& ex, bool chat);
  Engine& engine_;
  const Tokenizer& tok_;
  std::optional<ChatFormat> chat_;
  const ServerOptions& opts_;
  size_t max_token_bytes_ = 4;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace strata::server
