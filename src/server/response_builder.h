// One completion response built from its engine events, apart from HTTP and the engine: the
// non-streamed JSON body, or the SSE text of each event (text deltas with their tokens' logprobs,
// each choice's final chunk, the usage chunk when asked, "data: [DONE]" after the last choice).
// A response has a choice per prompt (completions' prompt arrays); echo puts a prompt's text (and,
// with logprobs, its tokens' logprobs, the first one null) before its completion's; with n > 1,
// choice i * n + j is prompt i's j-th, and usage counts each prompt once. Chat tool calls:
// with tools (tool_choice auto, required or a function) each reply is parsed (server/tool_calls.h) into
// content and message.tool_calls (finish_reason "tool_calls"); streamed, each call is delta.tool_calls
// chunks as OpenAI streams them: index, id, type and name with empty arguments, then the arguments;
// under the tools' grammar (the server always sets it) as they come, else when the call closes.
//
//   ResponseBuilder b(head, request, tok);       // request.prompts[i].tokens as evaluated
//   non-streamed: b.add(choice, ev) for each event; when b.done(): send b.body()
//   streamed:     write b.sse(choice, ev) for each event; the stream ends when b.done()
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/logprobs_json.h"
#include "server/openai_api.h"
#include "text/tokenizer.h"

namespace strata::server {

class ResponseBuilder {
 public:
  ResponseBuilder(ApiResponseHead head, const ApiRequest& r, const Tokenizer& tok);

  void add(int choice, const CompletionEvent& ev);
  // Every choice's last event arrived (or, streamed, one failed: its error ended the stream).
  bool done() const { return n_done_ == choices_.size() || failed_; }
  nlohmann::json body();  // when done(), no choice failed
  std::string sse(int choice, const CompletionEvent& ev);

 private:
  struct Choice {
    std::string text;                     // non-streamed: the text so far; streamed: the echo not yet sent
    std::optional<LogprobsJson> lp;       // logprobs asked
    std::optional<ToolCallParser> tools;  // streamed, with tools: the reply's calls as they close
    int n_calls = 0;                      // streamed: tool calls sent
    bool first = true;                    // streamed: no chunk of this choice sent yet
    bool new_line = false;                // streamed, native: a newline was sent
    bool done = false;
    FinishReason finish = FinishReason::stop;
  };
  void finish(int choice, Choice& c, const CompletionEvent& ev);
  std::string sse_calls(int choice, Choice& c, const ToolCallDelta& d);
  ApiResponseHead head_;
  bool include_usage_ = false;
  bool tools_auto_ = false;  // chat replies are parsed for calls in tool_syntax_
  ToolSyntax tool_syntax_ = ToolSyntax::hermes;
  std::vector<std::string> tool_hidden_;
  int n_ = 1;  // choices per prompt: usage counts each prompt once
  std::vector<Choice> choices_;
  size_t n_done_ = 0;
  bool failed_ = false;
  CompletionEvent totals_;  // the choices' counters summed (queue and first-token times: the longest)
};

}  // namespace strata::server
