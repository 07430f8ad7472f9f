// jinja::Template: lex + parse once, render per context.
#include "text/jinja/template.h"

namespace strata::jinja {

Result<Template> Template::parse(std::string_view source) {
  STRATA_ASSIGN(std::vector<Token> toks, lex(source));
  STRATA_ASSIGN(Body body, jinja::parse(toks));
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(body));
  return t;
}

Result<std::string> Template::render(const nlohmann::ordered_json& context, const Limits& limits) const {
  if (!context.is_object() && !context.is_null()) return err("a template's context must be a JSON object");
  ContainerArena arena;  // outlives the values: what cycles still hold when it ends is emptied
  Scope root;
  if (context.is_object())
    for (auto it = context.begin(); it != context.end(); ++it) {
      STRATA_ASSIGN(root.vars[it.key()], from_json(it.value()));
    }
  Interp in(limits, &root);
  std::string out;
  STRATA_TRY(in.exec(*body_, root, &out));
  return out;
}

}  // namespace strata::jinja
