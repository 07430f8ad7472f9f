#include "server/api_routes.h"

#include <algorithm>
#include <ctime>
#include <string_view>

#include "obs/latency_histogram.h"
#include "server/http_server.h"
#include "server/openai_api.h"
#include "server/text_routes.h"

namespace strata::server {

using nlohmann::json;

namespace {

// A path segment with its %XX escapes decoded (clients escape a model id's '/'); a '%' not
// followed by two hex digits stays as it is.
std::string percent_decoded(std::string_view s) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

Api::Api(Engine& engine, const Tokenizer& tok, std::optional<ChatFormat> chat, const ServerOptions& opts)
    : ctx_{engine, tok, chat, opts.model_name, opts.max_stop, opts.max_stop_bytes, 4, opts.profile},
      opts_(opts) {
  ctx_.jinja = opts.chat_jinja;
  // The longest piece, at least one UTF-8 character.
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    ctx_.max_token_bytes = std::max(ctx_.max_token_bytes, tok.token_to_piece(id, /*special=*/true).size());
}

std::vector<Route> Api::routes() {
  auto health = [this](const std::shared_ptr<Exchange>& ex) {
    const EngineCounters c = ctx_.engine.counters();
    ex->respond(json_response(200, json{{"status", "ok"},
                                        {"slots_idle", ctx_.engine.n_slots() - c.running},
                                        {"slots_processing", c.running},
                                        {"requests_waiting", c.waiting}}));
  };
  auto metrics = [this](const std::shared_ptr<Exchange>& ex) {
    std::string text = ctx_.engine.metrics_text();
    prometheus_scalar("strata_http_slow_clients_dropped_total", "counter",
                      "streams whose client stopped reading: over --max-unsent-bytes, request cancelled",
                      static_cast<double>(slow_clients_.load()), &text);
    ex->respond(HttpResponse{200, "text/plain; version=0.0.4", std::move(text), {}});
  };
  // A JSON answer of server/text_routes.h.
  auto reply = [](const std::shared_ptr<Exchange>& ex, const ApiReply& r) {
    ex->respond(json_response(r.status, r.body));
  };
  auto models = [this, reply](const std::shared_ptr<Exchange>& ex) { reply(ex, models_reply(ctx_)); };
  auto model = [this, reply](const std::shared_ptr<Exchange>& ex) {
    const std::string& path = ex->request().path;
    reply(ex, model_reply(ctx_, percent_decoded(std::string_view(path).substr(path.find("/models/") + 8))));
  };
  auto tokenize = [this, reply](const std::shared_ptr<Exchange>& ex) {
    reply(ex, tokenize_reply(ctx_, ex->request().body));
  };
  auto detokenize = [this, reply](const std::shared_ptr<Exchange>& ex) {
    reply(ex, detokenize_reply(ctx_, ex->request().body));
  };
  auto apply_template = [this, reply](const std::shared_ptr<Exchange>& ex) {
    reply(ex, apply_template_reply(ctx_, ex->request().body));
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
        200, json{{"default_generation_settings", {{"n_ctx", ctx_.engine.n_ctx()}, {"params", params}}},
                  {"total_slots", ctx_.engine.n_slots()},
                  {"model_alias", opts_.model_name},
                  {"chat_template", ctx_.chat ? json(chat_format_name(*ctx_.chat)) : json(nullptr)},
                  {"profile", profile_name(opts_.profile)},
                  {"modalities", {{"vision", false}, {"audio", false}}},
                  {"limits",
                   {{"max_body_bytes", opts_.max_body_bytes},
                    {"max_stop", opts_.max_stop},
                    {"max_stop_bytes", opts_.max_stop_bytes},
                    {"max_unsent_bytes", opts_.max_unsent_bytes},
                    {"max_prompt_bytes", static_cast<size_t>(ctx_.engine.n_ctx()) * ctx_.max_token_bytes},
                    {"timeout_s", opts_.timeout_s}}},
                  {"build_info", "strata"}}));
  };
  auto slots = [this](const std::shared_ptr<Exchange>& ex) {
    json out = json::array();
    for (const SlotInfo& s : ctx_.engine.slots()) {
      json j{{"id", s.id}, {"n_ctx", ctx_.engine.n_ctx()}, {"is_processing", s.processing}};
      if (s.processing) {
        j["id_task"] = s.request;
        j["n_prompt_tokens"] = s.n_prompt;
        j["params"] = {{"n_predict", s.n_predict}};
      }
      out.push_back(j);
    }
    ex->respond(json_response(200, out));
  };
  auto text = [this](const std::shared_ptr<Exchange>& ex) {
    CompletionJob::start(ctx_, next_id_++, ex, false);
  };
  auto chat = [this](const std::shared_ptr<Exchange>& ex) {
    CompletionJob::start(ctx_, next_id_++, ex, true);
  };
  auto infill = [this](const std::shared_ptr<Exchange>& ex) {
    CompletionJob::start(ctx_, next_id_++, ex, false, /*infill=*/true);
  };
  // {method, path, prefix (the rest of the path is a parameter), needs the API key, runs on a
  // worker, handler}
  return {
      {"GET", "/health", false, false, false, health},
      {"GET", "/metrics", false, false, false, metrics},
      {"GET", "/v1/models", false, true, false, models},
      {"GET", "/models", false, true, false, models},
      {"GET", "/v1/models/", true, true, false, model},
      {"GET", "/models/", true, true, false, model},
      {"GET", "/props", false, true, false, props},
      {"GET", "/slots", false, true, false, slots},
      {"POST", "/tokenize", false, true, true, tokenize},
      {"POST", "/v1/tokenize", false, true, true, tokenize},
      {"POST", "/detokenize", false, true, true, detokenize},
      {"POST", "/v1/detokenize", false, true, true, detokenize},
      {"POST", "/apply-template", false, true, true, apply_template},
      {"POST", "/v1/completions", false, true, true, text},
      {"POST", "/completions", false, true, true, text},
      {"POST", "/v1/chat/completions", false, true, true, chat},
      {"POST", "/chat/completions", false, true, true, chat},
      {"POST", "/infill", false, true, true, infill},
  };
}

}  // namespace strata::server
