#include "server/response_builder.h"

#include <algorithm>

#include "base/status.h"

namespace strata::server {

using nlohmann::json;

namespace {

std::string sse_line(const json& j) {
  return "data: " + json_text(j) + "\n\n";
}

// A chat choice whose content is a whole {"name", "arguments"} call becomes message.tool_calls
// (arguments as a JSON string, OpenAI's shape) with finish_reason "tool_calls"; anything else
// stays content.
void as_tool_call(const std::string& id, json* choice) {
  json& msg = (*choice)["message"];
  const json call = json::parse(msg["content"].get<std::string>(), nullptr, /*allow_exceptions=*/false);
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string() || !call.contains("arguments"))
    return;
  msg["content"] = nullptr;
  msg["tool_calls"] = json::array(
      {json{{"id", "call_" + id},
            {"type", "function"},
            {"function", {{"name", call["name"]}, {"arguments", json_text(call["arguments"])}}}}});
  (*choice)["finish_reason"] = "tool_calls";
}

}  // namespace

ResponseBuilder::ResponseBuilder(ApiResponseHead head, const ApiRequest& r, const Tokenizer& tok)
    : head_(std::move(head)),
      include_usage_(r.include_usage),
      tool_call_(r.tool_call),
      choices_(r.prompts.size()) {
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    Choice& c = choices_[i];
    const ApiPrompt& p = r.prompts[i];
    if (r.params.logprobs >= 0) c.lp.emplace(tok, head_.chat);
    if (!r.echo) continue;
    c.text = !p.text.empty() ? p.text : tok.decode(p.tokens);
    if (!c.lp || p.tokens.empty()) continue;
    std::string pieces;
    for (int32_t id : p.tokens) pieces += tok.token_to_piece(id);
    const bool prefixed = pieces.size() >= c.text.size() && pieces.ends_with(c.text);
    c.lp->add_unscored(p.tokens[0], prefixed ? pieces.size() - c.text.size() : 0);
  }
}

void ResponseBuilder::finish(Choice& c, const CompletionEvent& ev) {
  c.done = true;
  c.finish = ev.finish;
  ++n_done_;
  if (ev.finish == FinishReason::error) failed_ = true;
  totals_.n_prompt += ev.n_prompt;
  totals_.n_gen += ev.n_gen;
  totals_.n_decode += ev.n_decode;
  totals_.n_cached += ev.n_cached;
  totals_.prompt_s += ev.prompt_s;
  totals_.decode_s += ev.decode_s;
  totals_.sample_s += ev.sample_s;
  totals_.queue_s = std::max(totals_.queue_s, ev.queue_s);
  totals_.ttft_s = std::max(totals_.ttft_s, ev.ttft_s);
}

void ResponseBuilder::add(int choice, const CompletionEvent& ev) {
  STRATA_ASSERT(choice >= 0 && static_cast<size_t>(choice) < choices_.size());
  Choice& c = choices_[static_cast<size_t>(choice)];
  c.text += ev.text;
  if (c.lp) {
    c.lp->add(ev.prompt_logprobs);
    c.lp->add(ev.logprobs);
  }
  if (ev.done) finish(c, ev);
}

json ResponseBuilder::body() {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    choices.push_back(
        choice_body(head_.chat, static_cast<int>(i), c.text, c.finish, c.lp ? c.lp->take() : json(nullptr)));
    if (tool_call_ && c.finish == FinishReason::stop)
      as_tool_call(head_.id + "-" + std::to_string(i), &choices.back());
  }
  return completion_body(head_, std::move(choices), totals_);
}

std::string ResponseBuilder::sse(int choice, const CompletionEvent& ev) {
  STRATA_ASSERT(choice >= 0 && static_cast<size_t>(choice) < choices_.size());
  if (failed_) return "";  // the stream already ended with an error
  Choice& c = choices_[static_cast<size_t>(choice)];
  if (c.lp) {
    c.lp->add(ev.prompt_logprobs);
    c.lp->add(ev.logprobs);
  }
  std::string out;
  if (!ev.text.empty() || !c.text.empty() || (c.lp && !c.lp->empty())) {
    out += sse_line(
        chunk_body(head_, choice, c.text + ev.text, nullptr, c.first, c.lp ? c.lp->take() : json(nullptr)));
    c.text.clear();
    c.first = false;
  }
  if (!ev.done) return out;
  finish(c, ev);
  if (ev.finish == FinishReason::error) return out + sse_line(error_body(ev.error, 500)) + "data: [DONE]\n\n";
  out += sse_line(chunk_body(head_, choice, "", api_finish_reason(ev.finish), c.first));
  if (!done()) return out;
  if (include_usage_) {
    json u = chunk_body(head_, 0, "", nullptr, false);
    u["choices"] = json::array();
    u["usage"] = usage_body(totals_);
    u["timings"] = timings_body(totals_);
    out += sse_line(u);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace strata::server
