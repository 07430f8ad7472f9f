// A Jinja template of our own engine: the subset Hugging Face chat templates use (src/text/jinja/:
// lexer, parser, values, evaluator, filters / tests / globals, methods). Parsed once, rendered
// with a JSON context; rendering is safe for untrusted templates (GGUF metadata): errors (syntax,
// unknown filter or test, raise_exception, limits) are a Status naming the template line and
// column, and output bytes, steps and macro call depth are bounded (interp.h Limits).
//
// Whitespace as transformers renders chat templates and @huggingface/jinja does by default:
// trim_blocks and lstrip_blocks on, the source's one trailing newline dropped. Values print as
// @huggingface/jinja prints them (true / false, lists and dicts as JSON).
//
//   auto t = jinja::Template::parse(source);          // syntax errors here
//   auto text = t->render({{"messages", msgs}, {"add_generation_prompt", true}});
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "text/jinja/interp.h"

namespace strata::jinja {

class Template {
 public:
  static Result<Template> parse(std::string_view source);
  // The context's keys are the template's variables (a JSON object; key order kept).
  Result<std::string> render(const nlohmann::ordered_json& context, const Limits& limits = {}) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace strata::jinja
