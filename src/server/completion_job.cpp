#include "server/completion_job.h"

#include <algorithm>
#include <ctime>

namespace strata::server {

using nlohmann::json;

Result<std::string> render_chat(const std::optional<ChatFormat>& format, std::vector<ChatMessage> messages,
                                bool add_assistant_prompt) {
  if (!format)
    return err(
        "this model has no chat template strata knows; use /v1/completions or start the server with "
        "--chat-template NAME");
  const std::vector<std::string_view> roles = chat_format_roles(*format);
  const bool has_developer = std::find(roles.begin(), roles.end(), "developer") != roles.end();
  for (ChatMessage& m : messages)
    if (m.role == "developer" && !has_developer) m.role = "system";
  return chat_apply(*format, messages, add_assistant_prompt);
}

std::shared_ptr<CompletionJob> CompletionJob::start(const ApiContext& ctx, uint64_t id,
                                                    const std::string& body, bool chat, ApiError* error) {
  auto fail = [&](int status, std::string message) {
    *error = ApiError{status, std::move(message)};
    return nullptr;
  };
  auto parsed = parse_request(body, chat);
  if (!parsed.ok()) return fail(400, parsed.message());
  ApiRequest& r = *parsed;
  if (chat) {
    auto text = render_chat(ctx.chat, std::move(r.messages), /*add_assistant_prompt=*/true);
    if (!text.ok()) return fail(400, text.message());
    r.prompts = {ApiPrompt{std::move(*text), {}}};
  }
  for (ApiPrompt& p : r.prompts)
    if (p.tokens.empty()) p.tokens = ctx.tok.encode(p.text, /*add_special=*/true, /*parse_special=*/true);
  ApiResponseHead head;
  head.chat = chat;
  head.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
  head.model = ctx.model_name;
  head.created = static_cast<int64_t>(std::time(nullptr));
  std::shared_ptr<CompletionJob> job(new CompletionJob());
  job->stream_ = r.stream;
  job->out_.emplace(std::move(head), r, ctx.tok);
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    CompletionParams p = r.params;
    p.prompt = r.prompts[i].tokens;
    auto sub = ctx.engine.submit(std::move(p), EventChannel::sink(job->ch_, static_cast<int>(i)));
    if (!sub.ok()) {  // the choices already queued are cancelled by the closed channel
      job->close();
      const bool busy = sub.message().rfind("server busy", 0) == 0 || sub.message() == "server shutting down";
      std::string msg = sub.message();
      if (r.prompts.size() > 1) msg = "prompt " + std::to_string(i) + ": " + msg;
      return fail(busy ? 503 : 400, msg);
    }
  }
  return job;
}

std::pair<int, json> CompletionJob::wait() {
  for (;;) {
    int choice = 0;
    CompletionEvent ev = ch_->pop(&choice);
    if (ev.done && ev.finish == FinishReason::error) {
      close();
      return {500, error_body(ev.error, 500)};
    }
    out_->add(choice, ev);
    if (out_->done()) return {200, out_->body()};
  }
}

std::string CompletionJob::next_sse() {
  int choice = 0;
  CompletionEvent ev = ch_->pop(&choice);
  std::string s = out_->sse(choice, ev);
  if (out_->done()) close();  // after an error, the other choices stop
  return s;
}

}  // namespace strata::server
