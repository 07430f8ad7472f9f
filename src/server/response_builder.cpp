#include "server/response_builder.h"

namespace strata::server {

using nlohmann::json;

namespace {

std::string sse_line(const json& j) {
  return "data: " + json_text(j) + "\n\n";
}

}  // namespace

ResponseBuilder::ResponseBuilder(ApiResponseHead head, const ApiRequest& r, std::span<const int32_t> prompt,
                                 const Tokenizer& tok)
    : head_(std::move(head)), include_usage_(r.include_usage) {
  if (r.params.logprobs >= 0) lp_.emplace(tok, head_.chat);
  if (!r.echo) return;
  text_ =
      !r.prompt_text.empty() ? r.prompt_text : tok.decode(std::vector<int32_t>(prompt.begin(), prompt.end()));
  if (lp_ && !prompt.empty()) lp_->add_unscored(prompt[0]);
}

void ResponseBuilder::add_logprobs(const CompletionEvent& ev) {
  if (!lp_) return;
  lp_->add(ev.prompt_logprobs);
  lp_->add(ev.logprobs);
}

void ResponseBuilder::add(const CompletionEvent& ev) {
  text_ += ev.text;
  add_logprobs(ev);
}

json ResponseBuilder::body(const CompletionEvent& last) {
  return completion_body(head_, text_, last, lp_ ? lp_->take() : json(nullptr));
}

std::string ResponseBuilder::sse(const CompletionEvent& ev) {
  add_logprobs(ev);
  std::string out;
  if (!ev.text.empty() || !text_.empty() || (lp_ && !lp_->empty())) {
    out += sse_line(chunk_body(head_, text_ + ev.text, nullptr, first_, lp_ ? lp_->take() : json(nullptr)));
    text_.clear();
    first_ = false;
  }
  if (!ev.done) return out;
  if (ev.finish == FinishReason::error) {
    out += sse_line(error_body(ev.error, 500));
  } else {
    out += sse_line(chunk_body(head_, "", api_finish_reason(ev.finish), first_));
    if (include_usage_) {
      json u = chunk_body(head_, "", nullptr, false);
      u["choices"] = json::array();
      u["usage"] = usage_body(ev);
      u["timings"] = timings_body(ev);
      out += sse_line(u);
    }
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace strata::server
