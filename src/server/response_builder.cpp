#include "server/response_builder.h"

#include <algorithm>
#include <utility>

#include "base/status.h"

namespace strata::server {

using nlohmann::json;

namespace {

std::string sse_line(const json& j) {
  return "data: " + json_text(j) + "\n\n";
}

// The id of call k of a choice: "call_<response id>-<choice>" (then "-<k>" after the first).
std::string call_id(const ApiResponseHead& h, int choice, size_t k) {
  std::string id = "call_" + h.id + "-" + std::to_string(choice);
  return k == 0 ? id : id + "-" + std::to_string(k);
}

json call_json(const ApiResponseHead& h, int choice, size_t k, const ToolCall& c) {
  return json{{"id", call_id(h, choice, k)},
              {"type", "function"},
              {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

// A chat choice's message with its calls: tool_calls, the content null when there is none, and
// finish_reason "tool_calls" when the reply stopped by itself.
void with_calls(const ApiResponseHead& h, int choice, const ToolCallDelta& d, FinishReason finish,
                json* body) {
  if (d.calls.empty()) return;
  json& msg = (*body)["message"];
  msg["content"] = d.content.empty() ? json(nullptr) : json(d.content);
  json calls = json::array();
  for (size_t k = 0; k < d.calls.size(); ++k) calls.push_back(call_json(h, choice, k, d.calls[k]));
  msg["tool_calls"] = std::move(calls);
  if (finish == FinishReason::stop) (*body)["finish_reason"] = "tool_calls";
}

// llama-server's /completion object (/infill): the text, whether it is the last, and on the last
// its counters and timings.
json native_body(const ApiResponseHead& h, const std::string& text, bool stop, FinishReason finish,
                 const CompletionEvent& totals, bool has_new_line) {
  json j{{"index", 0}, {"content", text}, {"stop", stop}, {"id_slot", -1}, {"model", h.model}};
  if (!stop) return j;
  j["stop_type"] = finish == FinishReason::length ? "limit" : "eos";
  j["stopping_word"] = "";
  j["tokens_predicted"] = totals.n_gen;
  j["tokens_evaluated"] = totals.n_prompt;
  j["tokens_cached"] = totals.n_cached;
  j["truncated"] = false;
  j["has_new_line"] = has_new_line;
  j["timings"] = timings_body(totals);
  return j;
}

}  // namespace

ResponseBuilder::ResponseBuilder(ApiResponseHead head, const ApiRequest& r, const Tokenizer& tok)
    : head_(std::move(head)),
      include_usage_(r.include_usage),
      tools_auto_(r.tools_auto),
      tool_syntax_(r.tool_syntax),
      tool_hidden_(r.tool_hidden),
      n_(r.n),
      choices_(r.prompts.size()) {
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    Choice& c = choices_[i];
    const ApiPrompt& p = r.prompts[i];
    if (r.params.logprobs >= 0) c.lp.emplace(tok, head_.chat);
    // Under the tools' grammar (the server's job sets it) calls are well-formed: arguments stream.
    if (tools_auto_ && r.stream) c.tools.emplace(tool_syntax_, tool_hidden_, r.params.grammar != nullptr);
    if (!r.echo) continue;
    c.text = !p.text.empty() ? p.text : tok.decode(p.tokens);
    if (!c.lp || p.tokens.empty()) continue;
    std::string pieces;
    for (int32_t id : p.tokens) pieces += tok.token_to_piece(id);
    const bool prefixed = pieces.size() >= c.text.size() && pieces.ends_with(c.text);
    c.lp->add_unscored(p.tokens[0], prefixed ? pieces.size() - c.text.size() : 0);
  }
}

void ResponseBuilder::finish(int choice, Choice& c, const CompletionEvent& ev) {
  c.done = true;
  c.finish = ev.finish;
  ++n_done_;
  if (ev.finish == FinishReason::error) failed_ = true;
  if (choice % n_ == 0) {  // a prompt's n choices share it: counted once
    totals_.n_prompt += ev.n_prompt;
    totals_.n_cached += ev.n_cached;
  }
  totals_.n_gen += ev.n_gen;
  totals_.n_decode += ev.n_decode;
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
  if (ev.done) finish(choice, c, ev);
}

json ResponseBuilder::body() {
  if (head_.native) {
    const Choice& c = choices_[0];
    return native_body(head_, c.text, true, c.finish, totals_, c.text.find('\n') != std::string::npos);
  }
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    const int index = static_cast<int>(i);
    ToolCallDelta d;
    if (tools_auto_) d = parse_tool_calls(tool_syntax_, c.text, tool_hidden_);
    choices.push_back(choice_body(head_.chat, index, tools_auto_ ? d.content : c.text, c.finish,
                                  c.lp ? c.lp->take() : json(nullptr)));
    with_calls(head_, index, d, c.finish, &choices.back());
  }
  return completion_body(head_, std::move(choices), totals_);
}

// Each call: its index, id, type and name with empty arguments, then its arguments (a call under
// way: its head when its arguments begin, then their bytes as they come; the rest when it closes).
std::string ResponseBuilder::sse_calls(int choice, Choice& c, const ToolCallDelta& d) {
  std::string out;
  auto head = [&](const std::string& name) {
    const int k = c.n_calls++;
    json h = call_json(head_, choice, static_cast<size_t>(k), ToolCall{name, ""});
    h["index"] = k;
    out += sse_line(tool_calls_chunk_body(head_, choice, json::array({h}), c.first));
    c.first = false;
  };
  auto args = [&](const std::string& text) {
    json a{{"index", c.n_calls - 1}, {"function", {{"arguments", text}}}};
    out += sse_line(tool_calls_chunk_body(head_, choice, json::array({a}), false));
  };
  for (const ToolCall& call : d.calls) {
    if (!call.head_sent) head(call.name);
    const std::string rest = call.arguments.substr(std::min(call.args_sent, call.arguments.size()));
    if (!call.head_sent || !rest.empty()) args(rest);
  }
  if (d.opened) head(d.open_name);
  if (!d.args_delta.empty()) args(d.args_delta);
  return out;
}

std::string ResponseBuilder::sse(int choice, const CompletionEvent& ev) {
  STRATA_ASSERT(choice >= 0 && static_cast<size_t>(choice) < choices_.size());
  if (failed_) return "";  // the stream already ended with an error
  Choice& c = choices_[static_cast<size_t>(choice)];
  if (c.lp) {
    c.lp->add(ev.prompt_logprobs);
    c.lp->add(ev.logprobs);
  }
  // What this event shows: its text, or (tools) the content the parser lets through and the calls
  // that closed.
  ToolCallDelta d, rest;  // rest: what the end of the reply closes (after d's call under way)
  if (c.tools) {
    d = c.tools->feed(ev.text);
    if (ev.done) {
      rest = c.tools->finish();
      d.content += std::exchange(rest.content, std::string());
    }
  } else {
    d.content = std::exchange(c.text, std::string()) + ev.text;
  }
  if (head_.native) {  // one object per event; the last carries the counters
    c.new_line = c.new_line || d.content.find('\n') != std::string::npos;
    if (!ev.done)
      return d.content.empty()
                 ? ""
                 : sse_line(native_body(head_, d.content, false, c.finish, totals_, c.new_line));
    finish(choice, c, ev);
    if (ev.finish == FinishReason::error) return sse_line(error_body(ev.error, 500));
    return sse_line(native_body(head_, d.content, true, ev.finish, totals_, c.new_line));
  }
  std::string out;
  if (!d.content.empty() || (c.lp && !c.lp->empty())) {
    out +=
        sse_line(chunk_body(head_, choice, d.content, nullptr, c.first, c.lp ? c.lp->take() : json(nullptr)));
    c.first = false;
  }
  out += sse_calls(choice, c, d);
  out += sse_calls(choice, c, rest);
  if (!ev.done) return out;
  finish(choice, c, ev);
  if (ev.finish == FinishReason::error) return out + sse_line(error_body(ev.error, 500)) + "data: [DONE]\n\n";
  const char* reason =
      c.n_calls > 0 && ev.finish == FinishReason::stop ? "tool_calls" : api_finish_reason(ev.finish);
  out += sse_line(chunk_body(head_, choice, "", reason, c.first));
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
