// --jinja: a model's own chat template (tokenizer.chat_template, or --chat-template-file) rendered
// by strata's Jinja engine (text/jinja/) instead of a built-in format (chat_template.h), as
// llama-server --jinja does. The template sees an OpenAI chat request as transformers passes it:
// `messages` (role, content, and reasoning_content, tool_calls, name, tool_call_id where given),
// `tools` when the request has any, `add_generation_prompt`, `bos_token` / `eos_token` (the
// vocabulary's), and every chat_template_kwargs entry as a top-level variable (enable_thinking,
// reasoning_effort, ...; they override the others, as in llama.cpp).
//
// Messages are passed as the request wrote them but for two normalisations templates expect:
// content given as [{type: "text", text}] parts is their text joined, and a tool call's
// function.arguments given as a JSON string is that JSON (an object).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "text/jinja/template.h"

namespace strata {

class ChatJinja {
 public:
  // Parses the template (syntax errors name its line and column).
  static Result<ChatJinja> parse(std::string_view source, std::string bos_token, std::string eos_token);

  // The prompt for a chat request body {messages, tools?, chat_template_kwargs?}. Errors: a body
  // without a messages array, the template's own (raise_exception, an unknown filter, ...),
  // prefixed "chat template: ".
  Result<std::string> render(const nlohmann::ordered_json& body, bool add_generation_prompt) const;
  // The same from the body's JSON text.
  Result<std::string> render(const std::string& body_text, bool add_generation_prompt) const;

  const std::string& bos_token() const { return bos_; }

 private:
  jinja::Template tmpl_;
  std::string bos_, eos_;
};

}  // namespace strata
