// ChatJinja: a chat request as the variables of a model's Jinja chat template.
#include "text/chat_template_jinja.h"

namespace strata {
namespace {

using ojson = nlohmann::ordered_json;

// A message as templates expect it (see the header): text parts joined, JSON-string tool call
// arguments parsed.
ojson normalize_message(const ojson& m) {
  if (!m.is_object()) return m;
  ojson out = m;
  if (auto c = out.find("content"); c != out.end() && c->is_array()) {
    std::string text;
    bool all_text = true;
    for (const ojson& part : *c) {
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
          part["text"].is_string())
        text += part["text"].get<std::string>();
      else
        all_text = false;
    }
    if (all_text) *c = text;
  }
  if (auto calls = out.find("tool_calls"); calls != out.end() && calls->is_array()) {
    for (ojson& call : *calls) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      ojson& fn = call["function"];
      auto args = fn.find("arguments");
      if (args == fn.end() || !args->is_string()) continue;
      ojson parsed = ojson::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_discarded()) *args = std::move(parsed);
    }
  }
  return out;
}

}  // namespace

Result<ChatJinja> ChatJinja::parse(std::string_view source, std::string bos_token, std::string eos_token) {
  auto t = jinja::Template::parse(source);
  if (!t.ok()) return err("chat template: %s", t.message().c_str());
  ChatJinja c;
  c.tmpl_ = std::move(*t);
  c.bos_ = std::move(bos_token);
  c.eos_ = std::move(eos_token);
  return c;
}

Result<std::string> ChatJinja::render(const ojson& body, bool add_generation_prompt) const {
  if (!body.is_object()) return err("the request must be a JSON object");
  auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array())
    return err("'messages' is required: an array of {role, content}");
  ojson ctx = ojson::object();
  ojson messages = ojson::array();
  for (const ojson& m : *msgs) messages.push_back(normalize_message(m));
  ctx["messages"] = std::move(messages);
  if (auto tools = body.find("tools"); tools != body.end() && tools->is_array() && !tools->empty())
    ctx["tools"] = *tools;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_;
  ctx["eos_token"] = eos_;
  if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
    if (!kw->is_object()) return err("'chat_template_kwargs' must be an object");
    for (auto it = kw->begin(); it != kw->end(); ++it) ctx[it.key()] = it.value();
  }
  auto text = tmpl_.render(ctx);
  if (!text.ok()) return err("chat template: %s", text.message().c_str());
  return text;
}

Result<std::string> ChatJinja::render(const std::string& body_text, bool add_generation_prompt) const {
  const ojson body = ojson::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return err("request body is not valid JSON");
  return render(body, add_generation_prompt);
}

}  // namespace strata
