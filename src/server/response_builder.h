// One completion request's answer built from its engine events, apart from HTTP: the non-streamed
// JSON body, or the SSE text of each event (text deltas with their tokens' logprobs, the final
// chunk, the usage chunk when asked, "data: [DONE]"). Echo puts the prompt's text (and, with
// logprobs, its tokens' logprobs, the first one null) before the completion's.
//
//   ResponseBuilder b(head, request, prompt_tokens, tok);
//   non-streamed: for each event b.add(ev); at the last: send b.body(ev)
//   streamed:     for each event write b.sse(ev); done after the last event's
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "runtime/engine.h"
#include "server/logprobs_json.h"
#include "server/openai_api.h"
#include "text/tokenizer.h"

namespace strata::server {

class ResponseBuilder {
 public:
  // prompt: the tokens as evaluated (with BOS where the model adds one).
  ResponseBuilder(ApiResponseHead head, const ApiRequest& r, std::span<const int32_t> prompt,
                  const Tokenizer& tok);

  void add(const CompletionEvent& ev);
  nlohmann::json body(const CompletionEvent& last);  // after add(last); last.finish != error
  std::string sse(const CompletionEvent& ev);

 private:
  void add_logprobs(const CompletionEvent& ev);
  ApiResponseHead head_;
  bool include_usage_ = false;
  std::optional<LogprobsJson> lp_;  // logprobs asked
  std::string text_;                // non-streamed: the text so far; streamed: the echo not yet sent
  bool first_ = true;               // streamed: no chunk sent yet
};

}  // namespace strata::server
