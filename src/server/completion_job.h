// What POST /v1/completions and /v1/chat/completions do, apart from the HTTP transport: parse the
// body (server/openai_api.h), render chat messages, tokenize, submit one engine request per prompt
// (a choice each), and turn their events into the response (server/response_builder.h), whole or
// as SSE. The transport only moves bytes:
//
//   ApiError e;
//   auto job = CompletionJob::start(ctx, body, chat, &e);  // null: send e.status, error_body(e)
//   non-streamed: auto [status, json] = job->wait();
//   streamed:     while (!job->finished()) write(job->next_sse());  // job->close() if the client leaves
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "runtime/engine.h"
#include "server/event_channel.h"
#include "server/response_builder.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace strata::server {

struct ApiError {
  int status = 400;
  std::string message;
};

// What the OpenAI handlers need from the server.
struct ApiContext {
  Engine& engine;
  const Tokenizer& tok;
  std::optional<ChatFormat> chat;  // absent: chat requests (and /apply-template) are a 400
  std::string model_name;
};

// The prompt of a chat request: `messages` in `format`, the "developer" role written as "system"
// where the format has no role of that name (OpenAI's newer name for system instructions).
// Errors: no chat format; the template's own (an unknown role, ...).
Result<std::string> render_chat(const std::optional<ChatFormat>& format, std::vector<ChatMessage> messages,
                                bool add_assistant_prompt);

class CompletionJob {
 public:
  // Null with *error set when the request is bad (400) or the engine cannot take it (503 busy).
  static std::shared_ptr<CompletionJob> start(const ApiContext& ctx, uint64_t id, const std::string& body,
                                              bool chat, ApiError* error);
  ~CompletionJob() { close(); }

  bool stream() const { return stream_; }
  // Non-streamed: waits for every choice; the status (200, or 500 when the engine failed) and body.
  std::pair<int, nlohmann::json> wait();
  // Streamed: waits for the next event; its SSE text (may be empty). finished() after the last.
  std::string next_sse();
  bool finished() const { return out_->done(); }
  // The client went away: the engine cancels the unfinished requests at their next event.
  void close() { ch_->close(); }

 private:
  CompletionJob() = default;
  std::shared_ptr<EventChannel> ch_ = std::make_shared<EventChannel>();
  std::optional<ResponseBuilder> out_;
  bool stream_ = false;
};

}  // namespace strata::server
