#include "server/openai_api.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "server/json_schema_grammar.h"

namespace strata::server {

using nlohmann::json;

namespace {

const char* kind(const json& v) {
  return v.type_name();
}

Status want_number(const json& body, const char* key, double lo, double hi, double* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_number()) return err("'%s' must be a number, got %s", key, kind(*it));
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) return err("'%s' is %g; it must be in [%g, %g]", key, v, lo, hi);
  *out = v;
  return {};
}

Status want_int(const json& body, const char* key, int64_t lo, int64_t hi, int64_t* out,
                bool* present = nullptr) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_number_integer()) return err("'%s' must be an integer, got %s", key, kind(*it));
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    return err("'%s' is %lld; it must be in [%lld, %lld]", key, static_cast<long long>(v),
               static_cast<long long>(lo), static_cast<long long>(hi));
  *out = v;
  if (present) *present = true;
  return {};
}

Status want_bool(const json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_boolean()) return err("'%s' must be true or false, got %s", key, kind(*it));
  *out = it->get<bool>();
  return {};
}

// A field that changes the output and that strata does not implement: absent, null or its
// neutral value only.
Status refuse_unless_neutral(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return {};
  const bool neutral = (it->is_boolean() && !it->get<bool>()) ||
                       (it->is_number() && it->get<double>() == 0) ||
                       ((it->is_array() || it->is_object()) && it->empty());
  if (neutral) return {};
  return err("'%s' is not supported by strata serve", key);
}

Result<std::string> message_content(const json& m, size_t i) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array())
    return err("messages[%zu].content must be a string or an array of parts, got %s", i, kind(*it));
  std::string s;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& part = (*it)[k];
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return err("messages[%zu].content[%zu]: only {\"type\": \"text\", \"text\": ...} parts are supported",
                 i, k);
    s += part["text"].get<std::string>();
  }
  return s;
}

Result<std::vector<int32_t>> token_ids(const json& arr, const std::string& where) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& v = arr[i];
    if (!v.is_number_integer()) return err("%s[%zu] must be a token id, got %s", where.c_str(), i, kind(v));
    const int64_t t = v.get<int64_t>();
    if (t < 0 || t > std::numeric_limits<int32_t>::max())
      return err("%s[%zu] = %lld is not a token id", where.c_str(), i, static_cast<long long>(t));
    ids.push_back(static_cast<int32_t>(t));
  }
  if (ids.empty()) return err("%s is empty", where.c_str());
  return ids;
}

// A string, an array of token ids, or an array of several prompts (strings or arrays of ids).
Status parse_prompt(const json& body, ApiRequest* r) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return err("'prompt' is required");
  if (it->is_string()) {
    r->prompts.push_back(ApiPrompt{it->get<std::string>(), {}});
    return {};
  }
  if (!it->is_array()) return err("'prompt' must be a string or an array of token ids, got %s", kind(*it));
  if (it->empty()) return err("'prompt' is empty");
  if (!(*it)[0].is_string() && !(*it)[0].is_array()) {
    STRATA_ASSIGN(std::vector<int32_t> ids, token_ids(*it, "'prompt'"));
    r->prompts.push_back(ApiPrompt{"", std::move(ids)});
    return {};
  }
  if (it->size() > static_cast<size_t>(kMaxPrompts))
    return err("'prompt' holds %zu prompts; at most %d in one request", it->size(), kMaxPrompts);
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (v.is_string()) {
      r->prompts.push_back(ApiPrompt{v.get<std::string>(), {}});
    } else if (v.is_array()) {
      STRATA_ASSIGN(std::vector<int32_t> ids, token_ids(v, "'prompt'[" + std::to_string(i) + "]"));
      r->prompts.push_back(ApiPrompt{"", std::move(ids)});
    } else {
      return err("'prompt'[%zu] must be a string or an array of token ids, got %s", i, kind(v));
    }
  }
  return {};
}

// completions: logprobs (0..5 alternatives) and echo; chat: logprobs (bool) and top_logprobs
// (0..20, with logprobs: true).
Status parse_logprobs(const json& body, bool chat, ApiRequest* r) {
  CompletionParams& p = r->params;
  if (chat) {
    bool on = false;
    STRATA_TRY(want_bool(body, "logprobs", &on));
    int64_t top = 0;
    bool has_top = false;
    STRATA_TRY(want_int(body, "top_logprobs", 0, kMaxChatTopLogprobs, &top, &has_top));
    if (has_top && !on) return err("'top_logprobs' needs 'logprobs': true");
    if (on) p.logprobs = static_cast<int>(top);
    return refuse_unless_neutral(body, "echo");
  }
  int64_t n = -1;
  STRATA_TRY(want_int(body, "logprobs", 0, kMaxCompletionLogprobs, &n));
  p.logprobs = static_cast<int>(n);
  STRATA_TRY(want_bool(body, "echo", &r->echo));
  if (r->echo) p.prompt_logprobs = p.logprobs;
  return refuse_unless_neutral(body, "top_logprobs");  // completions spell it logprobs: N
}

// presence_penalty, frequency_penalty: [-2, 2]; logit_bias: {"token id": bias in [-100, 100]}.
Status parse_penalties(const json& body, SamplerParams* s) {
  double v = 0;
  STRATA_TRY(want_number(body, "presence_penalty", -2, 2, &v));
  s->presence_penalty = static_cast<float>(v);
  v = 0;
  STRATA_TRY(want_number(body, "frequency_penalty", -2, 2, &v));
  s->frequency_penalty = static_cast<float>(v);
  auto lb = body.find("logit_bias");
  if (lb == body.end() || lb->is_null()) return {};
  if (!lb->is_object()) return err("'logit_bias' must be an object of token id -> bias, got %s", kind(*lb));
  for (auto& [key, val] : lb->items()) {
    char* end = nullptr;
    errno = 0;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || errno != 0 || id < 0 || id > std::numeric_limits<int32_t>::max())
      return err("'logit_bias' key \"%s\" is not a token id", key.c_str());
    if (!val.is_number()) return err("'logit_bias'[\"%s\"] must be a number, got %s", key.c_str(), kind(val));
    const double b = val.get<double>();
    if (!std::isfinite(b) || b < -100 || b > 100)
      return err("'logit_bias'[\"%s\"] is %g; it must be in [-100, 100]", key.c_str(), b);
    s->logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  return {};
}

// grammar (GBNF), json_schema (llama.cpp's), response_format {type: text | json_object |
// json_schema}: at most one of them, compiled into p->grammar.
Status parse_constraint(const json& body, CompletionParams* p) {
  std::string field, gbnf;
  auto take = [&](const char* key) -> Status {
    if (!field.empty()) return err("'%s' and '%s' cannot be used together", field.c_str(), key);
    field = key;
    return {};
  };
  auto schema_grammar = [&](const json& schema, const std::string& where) -> Status {
    if (!schema.is_object() && !schema.is_boolean())
      return err("'%s' must be a JSON Schema object, got %s", where.c_str(), kind(schema));
    auto g = json_schema_to_grammar(schema);
    if (!g.ok()) return err("'%s': %s", where.c_str(), g.message().c_str());
    gbnf = std::move(*g);
    return {};
  };
  if (auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return err("'grammar' must be a string (GBNF), got %s", kind(*it));
    STRATA_TRY(take("grammar"));
    gbnf = it->get<std::string>();
  }
  if (auto it = body.find("json_schema"); it != body.end() && !it->is_null()) {
    STRATA_TRY(take("json_schema"));
    STRATA_TRY(schema_grammar(*it, "json_schema"));
  }
  if (auto rf = body.find("response_format"); rf != body.end() && !rf->is_null()) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      return err("'response_format' must be an object with a string 'type'");
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      STRATA_TRY(take("response_format"));
      if (auto sc = rf->find("schema"); sc != rf->end() && !sc->is_null()) {  // llama.cpp's extension
        STRATA_TRY(schema_grammar(*sc, "response_format.schema"));
      } else {
        gbnf = json_object_grammar();
      }
    } else if (type == "json_schema") {
      STRATA_TRY(take("response_format"));
      auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object() || !js->contains("schema"))
        return err("'response_format.json_schema.schema' is required for type json_schema");
      STRATA_TRY(schema_grammar((*js)["schema"], "response_format.json_schema.schema"));
    } else if (type != "text") {
      return err("'response_format.type' is '%s'; it must be text, json_object or json_schema", type.c_str());
    }
  }
  if (field.empty()) return {};
  auto g = Grammar::parse(gbnf);
  if (!g.ok()) return err("'%s': %s", field.c_str(), g.message().c_str());
  p->grammar = std::make_shared<const Grammar>(std::move(*g));
  return {};
}

// tools + tool_choice (chat): "none" ignores the tools; "auto" (the default with tools) leaves them
// to the job (rendered in the model's syntax, parsed back, a lazy grammar once a call opens);
// "required" or a named function the same with the whole reply constrained to calls (of that
// function).
Status parse_tools(const json& body, ApiRequest* r) {
  auto tools = body.find("tools");
  if (tools == body.end() || tools->is_null()) return refuse_unless_neutral(body, "tool_choice");
  if (!tools->is_array()) return err("'tools' must be an array, got %s", kind(*tools));
  std::vector<ToolFunction> fns;
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
        !t["function"].is_object())
      return err("'tools'[%zu] must be {\"type\": \"function\", \"function\": {...}}", i);
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      return err("'tools'[%zu].function.name must be a non-empty string", i);
    json params = f.contains("parameters") && !f["parameters"].is_null() ? f["parameters"] : json::object();
    fns.push_back(ToolFunction{f["name"].get<std::string>(), std::move(params)});
  }
  if (fns.empty()) return refuse_unless_neutral(body, "tool_choice");
  auto tc = body.find("tool_choice");
  std::string choice = "auto";
  if (tc != body.end() && !tc->is_null()) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
    } else if (tc->is_object() && tc->value("type", "") == "function" && tc->contains("function") &&
               (*tc)["function"].is_object() && (*tc)["function"].contains("name") &&
               (*tc)["function"]["name"].is_string()) {
      const std::string name = (*tc)["function"]["name"].get<std::string>();
      std::erase_if(fns, [&](const ToolFunction& f) { return f.name != name; });
      if (fns.empty()) return err("'tool_choice' names function '%s', which is not in 'tools'", name.c_str());
      choice = "required";
    } else {
      return err(
          "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
          "{\"name\"}}");
    }
  }
  if (choice == "none") return {};
  if (choice != "auto" && choice != "required")
    return err("'tool_choice' is \"%s\"; it must be none, auto or required", choice.c_str());
  STRATA_TRY(want_bool(body, "parallel_tool_calls", &r->parallel_tool_calls));
  if (r->params.grammar) return err("'tools' cannot be used together with a grammar or response_format");
  r->tools_auto = true;  // rendered and parsed in the model's syntax by the job (server/tool_calls.h)
  r->tool_required = choice == "required";
  r->tool_fns = std::move(fns);
  return {};
}

}  // namespace

Result<std::vector<ChatMessage>> parse_chat_messages(const json& body) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array()) return err("'messages' is required: an array of {role, content}");
  if (it->empty()) return err("'messages' is empty");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    if (!m.is_object()) return err("messages[%zu] must be an object, got %s", i, kind(m));
    if (!m.contains("role") || !m["role"].is_string()) return err("messages[%zu].role must be a string", i);
    STRATA_ASSIGN(std::string content, message_content(m, i));
    std::string reasoning;
    if (auto rc = m.find("reasoning_content"); rc != m.end() && !rc->is_null()) {
      if (!rc->is_string())
        return err("messages[%zu].reasoning_content must be a string, got %s", i, kind(*rc));
      reasoning = rc->get<std::string>();
    }
    out.push_back(ChatMessage{m["role"].get<std::string>(), std::move(content), std::move(reasoning)});
  }
  return out;
}

Result<ChatTools> parse_chat_tools(const std::string& text, bool with_tools) {
  using ojson = nlohmann::ordered_json;
  const ojson body = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  ChatTools t;
  if (!body.is_object()) return t;  // parse_request says what is wrong
  if (with_tools && body.contains("tools") && body["tools"].is_array()) t.tools = body["tools"];
  auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array()) return t;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    auto calls = m.is_object() ? m.find("tool_calls") : m.end();
    auto id = m.is_object() ? m.find("tool_call_id") : m.end();
    t.result_ids.push_back(id != m.end() && id->is_string() ? id->get<std::string>() : std::string());
    if (!m.is_object() || calls == m.end() || calls->is_null() || (calls->is_array() && calls->empty())) {
      t.calls.emplace_back(nullptr);
      continue;
    }
    if (m.value("role", "") != "assistant")
      return err("messages[%zu].tool_calls: only assistant messages have them", i);
    if (!calls->is_array())
      return err("messages[%zu].tool_calls must be an array, got %s", i, calls->type_name());
    for (size_t k = 0; k < calls->size(); ++k) {
      const ojson& c = (*calls)[k];
      const bool ok = c.is_object() && c.value("type", "function") == "function" && c.contains("function") &&
                      c["function"].is_object() && c["function"].contains("name") &&
                      c["function"]["name"].is_string() &&
                      (!c["function"].contains("arguments") || c["function"]["arguments"].is_string() ||
                       c["function"]["arguments"].is_object() || c["function"]["arguments"].is_null());
      if (!ok)
        return err(
            "messages[%zu].tool_calls[%zu] must be {\"type\": \"function\", \"function\": {\"name\": string, "
            "\"arguments\": a JSON string}}",
            i, k);
    }
    t.calls.push_back(*calls);
  }
  return t;
}

Result<bool> parse_chat_thinking(const json& body) {
  auto it = body.find("chat_template_kwargs");
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_object()) return err("'chat_template_kwargs' must be an object, got %s", kind(*it));
  bool thinking = false;
  for (const char* key : {"enable_thinking", "thinking"}) {
    auto k = it->find(key);
    if (k == it->end() || k->is_null()) continue;
    if (!k->is_boolean())
      return err("'chat_template_kwargs.%s' must be true or false, got %s", key, kind(*k));
    thinking = k->get<bool>();
  }
  return thinking;
}

Result<bool> parse_chat_reasoning_max(const json& body) {
  auto it = body.find("chat_template_kwargs");
  if (it == body.end() || !it->is_object()) return false;  // parse_chat_thinking says what is wrong
  auto k = it->find("reasoning_effort");
  if (k == it->end() || k->is_null()) return false;
  if (!k->is_string())
    return err("'chat_template_kwargs.reasoning_effort' must be a string, got %s", kind(*k));
  return k->get<std::string>() == "max";
}

Result<ApiRequest> parse_request(const std::string& text, bool chat) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return err("request body is not valid JSON");
  if (!body.is_object()) return err("request body must be a JSON object, got %s", kind(body));
  ApiRequest r;
  r.chat = chat;
  if (chat) {
    STRATA_ASSIGN(r.messages, parse_chat_messages(body));
    STRATA_ASSIGN(r.thinking, parse_chat_thinking(body));
    STRATA_ASSIGN(r.reasoning_max, parse_chat_reasoning_max(body));
  } else {
    STRATA_TRY(parse_prompt(body, &r));
  }
  if (auto m = body.find("model"); m != body.end() && m->is_string()) r.model = m->get<std::string>();
  CompletionParams& p = r.params;
  SamplerParams& s = p.sampling;
  int64_t n_predict = -1;
  const int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  STRATA_TRY(want_int(body, "n_predict", -1, kMaxTokens, &n_predict));
  STRATA_TRY(want_int(body, "max_tokens", 0, kMaxTokens, &n_predict));
  if (chat) STRATA_TRY(want_int(body, "max_completion_tokens", 0, kMaxTokens, &n_predict));
  p.n_predict = static_cast<int>(n_predict);
  double v = s.temp;
  STRATA_TRY(want_number(body, "temperature", 0, 100, &v));
  s.temp = static_cast<float>(v);
  v = s.top_p;
  STRATA_TRY(want_number(body, "top_p", 0, 1, &v));
  if (v <= 0) return err("'top_p' is 0; it must be in (0, 1]");
  s.top_p = static_cast<float>(v);
  v = s.min_p;
  STRATA_TRY(want_number(body, "min_p", 0, 1, &v));
  s.min_p = static_cast<float>(v);
  v = s.repeat_penalty;
  STRATA_TRY(want_number(body, "repeat_penalty", 1e-3, 100, &v));
  s.repeat_penalty = static_cast<float>(v);
  int64_t i = s.top_k;
  STRATA_TRY(want_int(body, "top_k", 0, kMaxTokens, &i));
  s.top_k = static_cast<int32_t>(i);
  i = s.repeat_last_n;
  STRATA_TRY(want_int(body, "repeat_last_n", 0, kMaxTokens, &i));
  s.repeat_last_n = static_cast<int32_t>(i);
  bool seeded = false;
  i = 0;
  STRATA_TRY(want_int(body, "seed", 0, std::numeric_limits<uint32_t>::max() - 1, &i, &seeded));
  if (seeded) s.seed = static_cast<uint32_t>(i);
  r.seeded = seeded;
  int64_t n = 1;
  STRATA_TRY(want_int(body, "n", 1, kMaxChoices, &n));
  r.n = static_cast<int>(n);
  if (!chat && r.prompts.size() * r.n > static_cast<size_t>(kMaxPrompts))
    return err("'n' is %d with %zu prompts: %zu choices, at most %d in one request", r.n, r.prompts.size(),
               r.prompts.size() * r.n, kMaxPrompts);
  STRATA_TRY(want_bool(body, "stream", &r.stream));
  STRATA_TRY(want_bool(body, "ignore_eos", &p.ignore_eos));
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) return err("'stream_options' must be an object, got %s", kind(*so));
    STRATA_TRY(want_bool(*so, "include_usage", &r.include_usage));
  }
  if (auto st = body.find("stop"); st != body.end() && !st->is_null()) {
    if (st->is_string()) {
      p.stop.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      for (size_t k = 0; k < st->size(); ++k) {
        if (!(*st)[k].is_string()) return err("'stop'[%zu] must be a string, got %s", k, kind((*st)[k]));
        p.stop.push_back((*st)[k].get<std::string>());
      }
    } else {
      return err("'stop' must be a string or an array of strings, got %s", kind(*st));
    }
  }
  STRATA_TRY(parse_logprobs(body, chat, &r));
  STRATA_TRY(parse_penalties(body, &s));
  if (auto sf = body.find("suffix"); !chat && sf != body.end() && !sf->is_null()) {
    if (!sf->is_string()) return err("'suffix' must be a string, got %s", kind(*sf));
    if (!sf->get<std::string>().empty()) {
      r.fim.emplace();
      r.fim->suffix = sf->get<std::string>();
    }
    if (r.fim && r.echo)
      return err("'echo' with 'suffix' is not supported (the prompt is rewritten for infill)");
  }
  for (const char* key : {"best_of", "tools", "suffix"}) {
    if (!chat && std::string(key) == "suffix") continue;
    if (chat && std::string(key) == "tools") continue;  // parse_tools
    if (std::string(key) == "best_of" && body.contains(key) && body[key].is_number_integer() &&
        body[key].get<int64_t>() == 1)
      continue;
    STRATA_TRY(refuse_unless_neutral(body, key));
  }
  STRATA_TRY(parse_constraint(body, &p));
  if (chat) STRATA_TRY(parse_tools(body, &r));
  if (chat && (r.tools_auto || text.find("tool_calls") != std::string::npos)) {
    STRATA_ASSIGN(r.tools, parse_chat_tools(text, r.tools_auto));
  }
  if (auto pr = body.find("profile"); pr != body.end() && !pr->is_null()) {
    if (!pr->is_string()) return err("'profile' must be a string (accurate or fast), got %s", kind(*pr));
    auto prof = parse_profile(pr->get<std::string>());
    if (!prof.ok()) return err("'profile': %s", prof.message().c_str());
    r.profile = *prof;
  }
  return r;
}

const char* api_finish_reason(FinishReason r) {
  return r == FinishReason::length ? "length" : "stop";
}

json usage_body(const CompletionEvent& last) {
  return json{{"prompt_tokens", last.n_prompt},
              {"completion_tokens", last.n_gen},
              {"total_tokens", last.n_prompt + last.n_gen},
              {"prompt_tokens_details", {{"cached_tokens", last.n_cached}}}};
}

json timings_body(const CompletionEvent& last) {
  const int n_decode = std::max(0, last.n_gen - 1);
  return json{
      {"cache_n", last.n_cached},
      {"prompt_n", last.n_prompt - last.n_cached},
      {"prompt_ms", last.prompt_s * 1e3},
      {"prompt_per_second", last.prompt_s > 0 ? (last.n_prompt - last.n_cached) / last.prompt_s : 0.0},
      {"predicted_n", last.n_gen},
      {"predicted_ms", last.decode_s * 1e3},
      {"predicted_per_second", last.decode_s > 0 ? n_decode / last.decode_s : 0.0},
      {"queue_ms", last.queue_s * 1e3},
      {"ttft_ms", last.ttft_s * 1e3}};
}

json choice_body(bool chat, int index, const std::string& text, FinishReason finish, const json& logprobs) {
  json choice{{"index", index}, {"finish_reason", api_finish_reason(finish)}};
  if (chat) {
    choice["message"] = json{{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs;
  return choice;
}

json completion_body(const ApiResponseHead& h, json choices, const CompletionEvent& totals) {
  return json{{"id", h.id},
              {"object", h.chat ? "chat.completion" : "text_completion"},
              {"created", h.created},
              {"model", h.model},
              {"choices", std::move(choices)},
              {"usage", usage_body(totals)},
              {"timings", timings_body(totals)}};
}

json chunk_body(const ApiResponseHead& h, int index, const std::string& text, const char* finish, bool first,
                const json& logprobs) {
  json choice{{"index", index}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
  if (h.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!finish) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs;
  return json{{"id", h.id},
              {"object", h.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", h.created},
              {"model", h.model},
              {"choices", json::array({choice})}};
}

json tool_calls_chunk_body(const ApiResponseHead& h, int index, json tool_calls, bool first) {
  json delta{{"tool_calls", std::move(tool_calls)}};
  if (first) delta["role"] = "assistant";
  return json{{"id", h.id},
              {"object", "chat.completion.chunk"},
              {"created", h.created},
              {"model", h.model},
              {"choices", json::array({json{{"index", index},
                                            {"delta", std::move(delta)},
                                            {"finish_reason", nullptr},
                                            {"logprobs", nullptr}}})}};
}

std::string json_text(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json error_body(const std::string& message, int code) {
  const char* type = code == 503   ? "unavailable_error"
                     : code >= 500 ? "server_error"
                                   : "invalid_request_error";
  return json{{"error", {{"message", message}, {"type", type}, {"code", code}}}};
}

}  // namespace strata::server
