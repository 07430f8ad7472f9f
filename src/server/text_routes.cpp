#include "server/text_routes.h"

#include <algorithm>
#include <ctime>
#include <limits>

#include "text/chat_template_jinja.h"
#include "text/utf8.h"

namespace strata::server {

using nlohmann::json;

namespace {

ApiReply bad(const std::string& message, int status = 400) {
  return ApiReply{status, error_body(message, status)};
}

Result<json> parse_object(const std::string& text) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return err("request body is not valid JSON");
  if (!body.is_object()) return err("request body must be a JSON object, got %s", body.type_name());
  return body;
}

// A boolean field; absent or null: `dflt`.
Result<bool> flag(const json& body, const char* key, bool dflt) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) return err("'%s' must be true or false, got %s", key, it->type_name());
  return it->get<bool>();
}

bool valid_utf8(const std::string& s) {
  return text::utf8_encode(text::utf8_decode(s)) == s;
}

json model_object(const ApiContext& ctx) {
  return json{{"id", ctx.model_name},
              {"object", "model"},
              {"created", static_cast<int64_t>(std::time(nullptr))},
              {"owned_by", "strata"},
              {"meta", {{"n_ctx_slot", ctx.engine.n_ctx()}, {"n_slots", ctx.engine.n_slots()}}}};
}

Result<ApiReply> tokenize(const ApiContext& ctx, const std::string& text) {
  STRATA_ASSIGN(json body, parse_object(text));
  if (body.contains("messages") || body.contains("prompt")) {  // vLLM's shapes
    std::string prompt;
    bool add_special = true;
    if (body.contains("messages")) {
      STRATA_ASSIGN(std::vector<ChatMessage> msgs, parse_chat_messages(body));
      STRATA_ASSIGN(bool gen, flag(body, "add_generation_prompt", true));
      STRATA_ASSIGN(bool thinking, parse_chat_thinking(body));
      STRATA_ASSIGN(bool reasoning_max, parse_chat_reasoning_max(body));
      if (ctx.jinja) {
        STRATA_ASSIGN(prompt, ctx.jinja->render(text, gen));
      } else {
        STRATA_ASSIGN(prompt, render_chat(ctx.chat, std::move(msgs),
                                          ChatOptions{.add_assistant_prompt = gen,
                                                      .thinking = thinking,
                                                      .reasoning_max = reasoning_max}));
      }
      STRATA_ASSIGN(add_special, flag(body, "add_special_tokens", false));
    } else {
      if (!body["prompt"].is_string())
        return err("'prompt' must be a string, got %s", body["prompt"].type_name());
      prompt = body["prompt"].get<std::string>();
      STRATA_ASSIGN(add_special, flag(body, "add_special_tokens", true));
    }
    const std::vector<int32_t> ids = ctx.tok.encode(prompt, add_special, /*parse_special=*/true);
    return ApiReply{200, json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.engine.n_ctx()}}};
  }
  auto it = body.find("content");
  if (it == body.end() || !it->is_string()) return err("'content' is required: the text to tokenize");
  STRATA_ASSIGN(bool add_special, flag(body, "add_special", false));
  STRATA_ASSIGN(bool parse_special, flag(body, "parse_special", true));
  STRATA_ASSIGN(bool with_pieces, flag(body, "with_pieces", false));
  const std::vector<int32_t> ids = ctx.tok.encode(it->get<std::string>(), add_special, parse_special);
  if (!with_pieces) return ApiReply{200, json{{"tokens", ids}}};
  json toks = json::array();
  for (int32_t id : ids) {
    const std::string piece = ctx.tok.token_to_piece(id, /*special=*/true);
    json p = valid_utf8(piece) ? json(piece) : json::array();
    if (p.is_array())
      for (unsigned char c : piece) p.push_back(static_cast<int>(c));
    toks.push_back(json{{"id", id}, {"piece", p}});
  }
  return ApiReply{200, json{{"tokens", toks}}};
}

Result<ApiReply> detokenize(const ApiContext& ctx, const std::string& text) {
  STRATA_ASSIGN(json body, parse_object(text));
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) return err("'tokens' is required: an array of token ids");
  std::vector<int32_t> ids;
  const int32_t n_vocab = ctx.tok.n_vocab();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_number_integer()) return err("'tokens'[%zu] must be a token id, got %s", i, v.type_name());
    const int64_t t = v.get<int64_t>();
    if (t < 0 || t >= n_vocab)
      return err("'tokens'[%zu] = %lld is outside the vocabulary (%d)", i, static_cast<long long>(t),
                 n_vocab);
    ids.push_back(static_cast<int32_t>(t));
  }
  const std::string content = ctx.tok.decode(ids, /*special=*/true);
  return ApiReply{200, json{{"content", content}, {"prompt", content}}};
}

// The prompt a chat completion with this body would run: its tools (tool_choice auto / required),
// the history's tool calls and results written as the chat route writes them.
Result<ApiReply> apply_template(const ApiContext& ctx, const std::string& text) {
  STRATA_ASSIGN(ApiRequest r, parse_request(text, /*chat=*/true));
  STRATA_ASSIGN(std::string prompt, render_chat_request(ctx, r, text));
  return ApiReply{200, json{{"prompt", prompt}}};
}

ApiReply or_400(Result<ApiReply> r) {
  return r.ok() ? std::move(*r) : bad(r.message());
}

}  // namespace

ApiReply tokenize_reply(const ApiContext& ctx, const std::string& body) {
  return or_400(tokenize(ctx, body));
}

ApiReply detokenize_reply(const ApiContext& ctx, const std::string& body) {
  return or_400(detokenize(ctx, body));
}

ApiReply apply_template_reply(const ApiContext& ctx, const std::string& body) {
  return or_400(apply_template(ctx, body));
}

ApiReply models_reply(const ApiContext& ctx) {
  return ApiReply{200, json{{"object", "list"}, {"data", json::array({model_object(ctx)})}}};
}

ApiReply model_reply(const ApiContext& ctx, const std::string& id) {
  if (id != ctx.model_name)
    return bad("model '" + id + "' does not exist; this server serves '" + ctx.model_name + "'", 404);
  return ApiReply{200, model_object(ctx)};
}

std::string cors_allow_origin(std::span<const std::string> allowed, const std::string& origin) {
  if (origin.empty()) return "";
  if (std::find(allowed.begin(), allowed.end(), origin) != allowed.end()) return origin;
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return "*";
  return "";
}

}  // namespace strata::server
