// The OpenAI-compatible request and response bodies of `strata serve` (/v1/completions,
// /v1/chat/completions), kept apart from HTTP so they can be tested as plain JSON.
//
// Accepted fields: prompt (a string, token ids, or an array of prompts — strings or id arrays — a
// choice each) / messages (role + content: a string or [{type: "text", text}]), max_tokens
// (max_completion_tokens, n_predict), temperature, top_p, top_k, min_p, repeat_penalty,
// repeat_last_n, presence_penalty and frequency_penalty ([-2, 2], over generated tokens),
// logit_bias ({"token id": [-100, 100]}), seed, stop (string or array), stream,
// stream_options.include_usage, ignore_eos, logprobs (completions: 0..5 alternatives; chat: true,
// with top_logprobs 0..20), echo (completions), n (1..kMaxChoices choices per prompt: choice
// i * n + j is prompt i's j-th sample, drawn with seed + j (vLLM's rule; without a seed the server
// draws one random base seed), best_of (1 only); constrained output,
// one of: grammar (GBNF, llama.cpp's), json_schema (llama.cpp's), response_format {type: text |
// json_object (optionally with llama.cpp's schema) | json_schema with json_schema.schema}
// (server/json_schema_grammar.h); chat: tools with tool_choice none / auto (the default: the tools
// rendered in the model's native syntax, its calls parsed back, server/tool_calls.h) / required / a
// named function (the same, the whole reply grammar-constrained to calls; a named function's only),
// parallel_tool_calls, assistant messages with
// tool_calls and tool messages in the history; suffix (completions, a non-empty string: the prompt is
// the code before the hole, text/fim.h; a model without fill-in-the-middle tokens answers 400).
// /infill takes llama-server's fields (input_prefix, input_suffix, input_extra, prompt) and answers
// in llama-server's /completion shape. Anything that would change the output but is not supported
// is an error that names the field, never silently ignored.
#pragma once

#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/profile.h"
#include "runtime/engine.h"
#include "server/json_schema_grammar.h"
#include "server/tool_calls.h"
#include "text/chat_template.h"
#include "text/fim.h"

namespace strata::server {

constexpr int kMaxCompletionLogprobs = 5;  // /v1/completions "logprobs": N (OpenAI's limit)
constexpr int kMaxChatTopLogprobs = 20;    // /v1/chat/completions "top_logprobs"

constexpr int kMaxPrompts = 64;  // /v1/completions: prompts in one request (one choice each)
constexpr int kMaxChoices = 16;  // "n": choices per prompt at most (and kMaxPrompts choices in all)

// One prompt: text (tokenized by the server) or token ids.
struct ApiPrompt {
  std::string text;
  std::vector<int32_t> tokens;
};

struct ApiRequest {
  bool chat = false;
  std::vector<ApiPrompt> prompts;     // completions: one per choice; chat: filled from messages
  std::vector<ChatMessage> messages;  // chat
  bool thinking = false;              // chat: chat_template_kwargs.enable_thinking (parse_chat_thinking)
  bool reasoning_max = false;         // chat: chat_template_kwargs.reasoning_effort "max"
  CompletionParams params;            // prompt filled by the caller after tokenizing
  bool stream = false;
  bool include_usage = false;
  bool echo = false;  // completions: the prompt's text (and logprobs) before the completion's
  // chat, tool_choice auto, required or a named function: the tools (rendered and parsed in the
  // model's syntax by the job); tool_required: the reply is only calls (of tool_fns).
  bool tools_auto = false;
  bool tool_required = false;
  std::vector<ToolFunction> tool_fns;
  bool parallel_tool_calls = true;
  ToolSyntax tool_syntax = ToolSyntax::hermes;  // set by the job from the chat format
  std::vector<std::string> tool_hidden;  // markers that are control tokens: parsed, never content (the job)
  ChatTools tools;  // the request's tools and the history's tool calls, in the body's key order
  int n = 1;        // choices per prompt
  bool seeded = false;
  std::optional<FimInput>
      fim;              // suffix / infill: each prompt is the prefix (FimInput::prefix set by the job)
  bool native = false;  // /infill: llama-server's response shape (ApiResponseHead::native)
  std::optional<Profile> profile;  // "profile": "accurate" | "fast" (runtime/profile.h); absent: the server's
  std::string model;
};

// A body's "messages": [{role, content: a string or [{type: "text", text}], reasoning_content?}, ..].
Result<std::vector<ChatMessage>> parse_chat_messages(const nlohmann::json& body);
// A body's "tools" (when rendered) and each message's "tool_calls", parsed again keeping the body's key
// order (what a model's template shows); bad tool_calls are errors naming the message.
Result<ChatTools> parse_chat_tools(const std::string& body, bool with_tools);
// A body's thinking switch for formats with a thinking mode (deepseek4): chat_template_kwargs
// .enable_thinking or .thinking (as vLLM and llama-server take it); false when absent.
Result<bool> parse_chat_thinking(const nlohmann::json& body);
// chat_template_kwargs.reasoning_effort (a string; DeepSeek-V4's template): true for "max", which with
// thinking on puts the template's maximum-effort preamble first.
Result<bool> parse_chat_reasoning_max(const nlohmann::json& body);

// Parses a request body. Errors name the field and what was expected.
Result<ApiRequest> parse_request(const std::string& body, bool chat);
// llama-server's /infill body: input_prefix, input_suffix (strings), input_extra ([{text,
// filename}]), prompt (a string, the start of the middle), and the completion fields above.
Result<ApiRequest> parse_infill_request(const std::string& body);

// The shared identity of one response's chunks.
struct ApiResponseHead {
  std::string id;     // "cmpl-N" / "chatcmpl-N"
  std::string model;  // echoed as the model name
  int64_t created = 0;
  bool chat = false;
  // llama-server's native shape (/infill): {content, stop, stop_type, tokens_predicted,
  // tokens_evaluated, timings, ...}; streamed, one such object per event and no [DONE].
  bool native = false;
};

// One choice of a non-streamed body: its whole text, finish reason, logprobs (null when not asked).
nlohmann::json choice_body(bool chat, int index, const std::string& text, FinishReason finish,
                           const nlohmann::json& logprobs = nullptr);
// Non-streamed body: the choices, and usage and llama-server-style timings from `totals` (the last
// events' counters, summed over the choices).
nlohmann::json completion_body(const ApiResponseHead& h, nlohmann::json choices,
                               const CompletionEvent& totals);
// One SSE chunk of choice `index`: a text delta with its tokens' logprobs (finish == nullptr) or the
// choice's final chunk (finish reason set).
nlohmann::json chunk_body(const ApiResponseHead& h, int index, const std::string& text, const char* finish,
                          bool first, const nlohmann::json& logprobs = nullptr);
// A chat chunk of choice `index` whose delta is {"tool_calls": [...]} (role too when first).
nlohmann::json tool_calls_chunk_body(const ApiResponseHead& h, int index, nlohmann::json tool_calls,
                                     bool first);
nlohmann::json usage_body(const CompletionEvent& last);
nlohmann::json timings_body(const CompletionEvent& last);
// A body as text: invalid UTF-8 in model text becomes U+FFFD (never an exception).
std::string json_text(const nlohmann::json& j);
// {"error": {"message", "type", "code"}}
nlohmann::json error_body(const std::string& message, int code);
// OpenAI finish reasons: stop | length (cancelled/error never reach a client; tool_calls is set by
// the response builder).
const char* api_finish_reason(FinishReason r);

}  // namespace strata::server
