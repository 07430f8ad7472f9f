// The server's routes besides completions, apart from the HTTP transport (each takes the request
// body or path parameter and returns a status and JSON body):
//   POST /tokenize        llama.cpp: {"content", "add_special" (false), "parse_special" (true),
//                         "with_pieces" (false)} -> {"tokens": [id, ..] or [{"id", "piece"}, ..]}
//                         (a piece that is not valid UTF-8 is its bytes); vLLM: {"prompt",
//                         "add_special_tokens" (true)} or {"messages", "add_generation_prompt"
//                         (true)} -> {"tokens", "count", "max_model_len"}
//   POST /detokenize      {"tokens": [id, ..]} -> {"content": text, "prompt": text} (llama.cpp's and
//                         vLLM's names)
//   POST /apply-template  a chat request ({"messages": [..], "tools", "chat_template_kwargs"}) ->
//                         {"prompt": the chat template's text the chat route would run, tools and
//                         the history's calls and results included, with the assistant's opening}
//   GET  /v1/models       the model list; /v1/models/{id} (%XX-escapes decoded): the model, or a
//                         404 for another id
// and the CORS decision (ServerOptions::cors_origins).
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "server/completion_job.h"

namespace strata::server {

struct ApiReply {
  int status = 200;
  nlohmann::json body;
};

ApiReply tokenize_reply(const ApiContext& ctx, const std::string& body);
ApiReply detokenize_reply(const ApiContext& ctx, const std::string& body);
ApiReply apply_template_reply(const ApiContext& ctx, const std::string& body);
ApiReply models_reply(const ApiContext& ctx);
ApiReply model_reply(const ApiContext& ctx, const std::string& id);

// The Access-Control-Allow-Origin value for a request from `origin` ("" when it is not allowed or
// there is no origin): the origin itself when listed, "*" when "*" is listed.
std::string cors_allow_origin(std::span<const std::string> allowed, const std::string& origin);

}  // namespace strata::server
