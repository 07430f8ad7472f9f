// What POST /v1/completions and /v1/chat/completions do, apart from the HTTP transport: parse the
// body (server/openai_api.h), render chat messages, check the server's limits (stop strings; a
// prompt's bytes against what a slot's context can hold, before tokenizing), tokenize, submit one
// engine request per choice (n per prompt: a prompt's first choice at once, its others at that
// choice's first event, so that they adopt the prompt's KV blocks from the prefix cache instead of
// prefilling them again), and turn their events into the response
// (server/response_builder.h), whole or as SSE. The engine's events are posted through the exchange
// and built into the answer on the server's I/O thread; nothing waits. max_tokens 0 without prompt
// logprobs is answered without the engine. A closed exchange (the client gone, the server
// stopping, the answer sent) makes the engine's next event cancel the choices still running.
//
//   CompletionJob::start(ctx, id, exchange, chat);   // answers through the exchange, errors too
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/profile.h"
#include "runtime/engine.h"
#include "server/http_exchange.h"
#include "server/response_builder.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace strata {
class ChatJinja;  // text/chat_template_jinja.h
}  // namespace strata

namespace strata::server {

// What the API's handlers need from the server.
struct ApiContext {
  Engine& engine;
  const Tokenizer& tok;
  std::optional<ChatFormat> chat;  // absent: chat requests (and /apply-template) are a 400
  std::string model_name;
  int max_stop = 16;            // stop strings per request at most
  size_t max_stop_bytes = 256;  // bytes of one stop string at most
  // Bytes one token can stand for at most: a prompt longer than n_ctx times this cannot fit a slot.
  size_t max_token_bytes = 4;
  Profile profile = Profile::accurate;  // a request's without "profile" (--profile)
  // --jinja: the model's template renders chat prompts (render_chat_request); null: `chat` does.
  std::shared_ptr<const ChatJinja> jinja = {};
};

// The prompt of a chat request: `messages` in `format`, the "developer" role written as "system"
// where the format has no role of that name (OpenAI's newer name for system instructions).
// `inserts`: text written between turns (server/tool_calls.h). Errors: no chat format; the
// template's own (an unknown role, ...).
Result<std::string> render_chat(const std::optional<ChatFormat>& format, std::vector<ChatMessage> messages,
                                const ChatOptions& opts, const ChatInserts& inserts = {});

// The prompt of a parsed chat request `r` whose body is `body`: the --jinja template's rendering of
// the body (tools and the history's calls written by the template), else render_chat with the
// built-in format (tools written by apply_chat_tools). Errors name the template's line and column.
Result<std::string> render_chat_request(const ApiContext& ctx, ApiRequest& r, const std::string& body,
                                        bool add_generation_prompt = true);

class CompletionJob {
 public:
  // Answers ex's request (its body; waiting counted from its t_arrival): a 400 when it is bad, a
  // 503 with Retry-After when the engine's queue is full, else the completion, streamed or not.
  // infill: llama-server's /infill body and response shape (parse_infill_request).
  static void start(const ApiContext& ctx, uint64_t id, const std::shared_ptr<Exchange>& ex, bool chat,
                    bool infill = false);
};

}  // namespace strata::server
