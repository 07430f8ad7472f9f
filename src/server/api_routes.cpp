#include "server/api_routes.h"

#include <algorithm>
#include <ctime>

#include "server/http_server.h"
#include "server/openai_api.h"

namespace strata::server {

using nlohmann::json;

namespace {

// Model text is bytes: a token may end inside a UTF-8 character or hold an invalid sequence.
// JSON needs valid UTF-8, so invalid bytes become U+FFFD (never an exception on a server thread).
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

// A completion's answer, built on the I/O thread from the engine's events.
struct Answer {
  ApiResponseHead head;
  bool stream = false;
  bool include_usage = false;
  bool begun = false;  // stream: the 200 and its headers are on their way
  bool first = true;   // stream: the next text chunk is the first (chat: it carries the role)
  std::string text;    // not streamed: the text so far
};

const std::string& shutdown_event() {
  static const std::string s = sse(error_body("server shutting down", 503)) + "data: [DONE]\n\n";
  return s;
}

void begin(Exchange& ex, Answer& a) {
  if (a.begun) return;
  a.begun = true;
  ex.begin_stream("text/event-stream", shutdown_event());
}

// One engine event (I/O thread): a streamed answer's SSE chunks, or the whole answer at the end.
void deliver(Exchange& ex, Answer& a, const CompletionEvent& ev) {
  if (!a.stream) {
    a.text += ev.text;
    if (!ev.done) return;
    if (ev.finish == FinishReason::error) return ex.respond(error_response(500, ev.error));
    return ex.respond(json_response(200, completion_body(a.head, a.text, ev)));
  }
  begin(ex, a);
  std::string out;
  if (!ev.text.empty()) {
    out += sse(chunk_body(a.head, ev.text, nullptr, a.first));
    a.first = false;
  }
  if (ev.done) {
    if (ev.finish == FinishReason::error) {
      out += sse(error_body(ev.error, 500));
    } else {
      out += sse(chunk_body(a.head, "", api_finish_reason(ev.finish), a.first));
      if (a.include_usage) {
        json u = chunk_body(a.head, "", nullptr, false);
        u["choices"] = json::array();
        u["usage"] = usage_body(ev);
        u["timings"] = timings_body(ev);
        out += sse(u);
      }
    }
    out += "data: [DONE]\n\n";
  }
  if (!out.empty()) ex.write(std::move(out));
  if (ev.done) ex.end_stream();
}

}  // namespace

Api::Api(Engine& engine, const Tokenizer& tok, std::optional<ChatFormat> chat, const ServerOptions& opts)
    : engine_(engine), tok_(tok), chat_(chat), opts_(opts) {
  for (int32_t id = 0; id < tok_.n_vocab(); ++id)
    max_token_bytes_ = std::max(max_token_bytes_, tok_.token_to_piece(id, /*special=*/true).size());
}

std::vector<Route> Api::routes() {
  auto health = [this](const std::shared_ptr<Exchange>& ex) {
    const EngineCounters c = engine_.counters();
    ex->respond(json_response(200, json{{"status", "ok"},
                                        {"slots_idle", engine_.n_slots() - c.running},
                                        {"slots_processing", c.running},
                                        {"requests_waiting", c.waiting}}));
  };
  auto metrics = [this](const std::shared_ptr<Exchange>& ex) {
    ex->respond(HttpResponse{200, "text/plain; version=0.0.4", engine_.metrics_text(), {}});
  };
  auto models = [this](const std::shared_ptr<Exchange>& ex) {
    json m{{"id", opts_.model_name},
           {"object", "model"},
           {"created", static_cast<int64_t>(std::time(nullptr))},
           {"owned_by", "strata"},
           {"meta", {{"n_ctx_slot", engine_.n_ctx()}, {"n_slots", engine_.n_slots()}}}};
    ex->respond(json_response(200, json{{"object", "list"}, {"data", json::array({m})}}));
  };
  auto props = [this](const std::shared_ptr<Exchange>& ex) {
    const SamplerParams d;
    json params{{"n_predict", -1},
                {"temperature", d.temp},
                {"top_k", d.top_k},
                {"top_p", d.top_p},
                {"min_p", d.min_p},
                {"repeat_penalty", d.repeat_penalty},
                {"repeat_last_n", d.repeat_last_n}};
    ex->respond(json_response(
        200, json{{"default_generation_settings", {{"n_ctx", engine_.n_ctx()}, {"params", params}}},
                  {"total_slots", engine_.n_slots()},
                  {"model_alias", opts_.model_name},
                  {"chat_template", chat_ ? json(chat_format_name(*chat_)) : json(nullptr)},
                  {"modalities", {{"vision", false}, {"audio", false}}},
                  {"limits",
                   {{"max_body_bytes", opts_.max_body_bytes},
                    {"max_stop", opts_.max_stop},
                    {"max_stop_bytes", opts_.max_stop_bytes},
                    {"max_prompt_bytes", static_cast<size_t>(engine_.n_ctx()) * max_token_bytes_},
                    {"timeout_s", opts_.timeout_s}}},
                  {"build_info", "strata"}}));
  };
  auto slots = [this](const std::shared_ptr<Exchange>& ex) {
    json out = json::array();
    for (const SlotInfo& s : engine_.slots()) {
      json j{{"id", s.id}, {"n_ctx", engine_.n_ctx()}, {"is_processing", s.processing}};
      if (s.processing) {
        j["id_task"] = s.request;
        j["n_prompt_tokens"] = s.n_prompt;
        j["params"] = {{"n_predict", s.n_predict}};
      }
      out.push_back(j);
    }
    ex->respond(json_response(200, out));
  };
  auto text = [this](const std::shared_ptr<Exchange>& ex) { completion(ex, false); };
  auto chat = [this](const std::shared_ptr<Exchange>& ex) { completion(ex, true); };
  // {method, path, needs the API key, runs on a worker, handler}
  return {
      {"GET", "/health", false, false, health},
      {"GET", "/metrics", false, false, metrics},
      {"GET", "/v1/models", true, false, models},
      {"GET", "/models", true, false, models},
      {"GET", "/props", true, false, props},
      {"GET", "/slots", true, false, slots},
      {"POST", "/v1/completions", true, true, text},
      {"POST", "/completions", true, true, text},
      {"POST", "/v1/chat/completions", true, true, chat},
      {"POST", "/chat/completions", true, true, chat},
  };
}

void Api::completion(const std::shared_ptr<Exchange>& ex, bool chat) {
  const HttpRequest& req = ex->request();
  auto parsed = parse_request(req.body, chat);
  if (!parsed.ok()) return ex->respond(error_response(400, parsed.message()));
  ApiRequest& r = *parsed;
  CompletionParams& p = r.params;
  if (static_cast<int>(p.stop.size()) > opts_.max_stop)
    return ex->respond(error_response(400, "'stop' has " + std::to_string(p.stop.size()) +
                                               " strings; this server takes at most " +
                                               std::to_string(opts_.max_stop) + " (--max-stop)"));
  for (size_t i = 0; i < p.stop.size(); ++i)
    if (p.stop[i].size() > opts_.max_stop_bytes)
      return ex->respond(error_response(400, "'stop'[" + std::to_string(i) + "] is " +
                                                 std::to_string(p.stop[i].size()) + " bytes; at most " +
                                                 std::to_string(opts_.max_stop_bytes) + " are allowed"));
  if (chat) {
    if (!chat_)
      return ex->respond(
          error_response(400,
                         "this model has no chat template strata knows; use /v1/completions or "
                         "start the server with --chat-template NAME"));
    auto text = chat_apply(*chat_, r.messages, /*add_assistant_prompt=*/true);
    if (!text.ok()) return ex->respond(error_response(400, text.message()));
    r.prompt_text = std::move(*text);
  }
  if (r.prompt_tokens.empty()) {
    // Tokenizing costs time in proportion to the bytes: a prompt that cannot fit is refused first.
    const size_t cap = static_cast<size_t>(engine_.n_ctx()) * max_token_bytes_;
    if (r.prompt_text.size() > cap)
      return ex->respond(error_response(
          400, "prompt is " + std::to_string(r.prompt_text.size()) + " bytes but the context of a slot is " +
                   std::to_string(engine_.n_ctx()) + " tokens, which hold at most " + std::to_string(cap) +
                   " bytes (" + std::to_string(max_token_bytes_) + " per token at most)"));
    r.prompt_tokens = tok_.encode(r.prompt_text, /*add_special=*/true, true);
  }
  p.prompt = std::move(r.prompt_tokens);
  p.t_arrival = req.t_arrival;
  auto a = std::make_shared<Answer>();
  a->head.chat = chat;
  a->head.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
  a->head.model = opts_.model_name;
  a->head.created = static_cast<int64_t>(std::time(nullptr));
  a->stream = r.stream;
  a->include_usage = r.include_usage;

  if (p.n_predict == 0) {  // nothing to generate: no engine work, an empty answer
    const int n = static_cast<int>(p.prompt.size());
    if (n > engine_.n_ctx())
      return ex->respond(error_response(400, "prompt is " + std::to_string(n) +
                                                 " tokens but the context of a slot is " +
                                                 std::to_string(engine_.n_ctx())));
    for (int32_t t : p.prompt)
      if (t < 0 || t >= tok_.n_vocab())
        return ex->respond(error_response(400, "token id " + std::to_string(t) +
                                                   " is outside the vocabulary (" +
                                                   std::to_string(tok_.n_vocab()) + ")"));
    CompletionEvent last;
    last.done = true;
    last.finish = FinishReason::length;
    last.n_prompt = n;
    ex->post([ex, a, last] { deliver(*ex, *a, last); });
    return;
  }

  CompletionSink sink = [ex, a](const CompletionEvent& ev) {
    CompletionEvent e = ev;
    e.logits = {};  // valid during the call only (and not asked for)
    return ex->post([ex, a, e = std::move(e)] { deliver(*ex, *a, e); });
  };
  auto id = engine_.submit(std::move(p), std::move(sink));
  if (!id.ok()) {
    const bool busy = id.message().rfind("server busy", 0) == 0 || id.message() == "server shutting down";
    HttpResponse res = error_response(busy ? 503 : 400, id.message());
    if (busy) res.headers.emplace_back("Retry-After", "1");
    return ex->respond(std::move(res));
  }
  if (a->stream) ex->post([ex, a] { begin(*ex, *a); });  // the headers go now, before the first token
}

}  // namespace strata::server
