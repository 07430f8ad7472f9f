// The GBNF of a model's tool calls in its own syntax (server/tool_calls.h): each call names one of
// the request's functions and its arguments match that function's parameters (JSON Schema,
// server/json_schema_grammar.h). With tool_choice auto the grammar starts at the syntax's trigger
// (a lazy grammar, runtime/lazy_grammar.h); with required or a named function it is the whole reply.
#include <algorithm>
#include <functional>
#include <optional>

#include "server/json_schema_grammar.h"
#include "server/tool_calls.h"

namespace strata::server {

using nlohmann::json;

namespace {

const std::string kDsml = "｜DSML｜";

std::string lit(const std::string& text) {
  return gbnf_literal(text);
}

// `text` as a GBNF sequence: literals, and `<[id]>` where a marker is one control token.
std::string seq(const std::string& text, const ToolMarkerTokens& tokens) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  for (size_t at = 0; at < text.size();) {
    size_t best = std::string::npos;
    const std::pair<std::string, int32_t>* m = nullptr;
    for (const auto& t : tokens)
      if (const size_t f = text.find(t.first, at); !t.first.empty() && f < best) {
        best = f;
        m = &t;
      }
    if (m == nullptr) {
      add(lit(text.substr(at)));
      break;
    }
    if (best > at) add(lit(text.substr(at, best - at)));
    add("<[" + std::to_string(m->second) + "]>");
    at = best + m->first.size();
  }
  return out.empty() ? "\"\"" : out;
}

// One alternative per function: `head(name) args tail`, where args is its parameters' expression.
Result<std::string> per_function(const std::vector<ToolFunction>& fns, std::string* rules,
                                 const std::function<std::string(const std::string& name)>& head,
                                 const std::string& tail) {
  std::string alt;
  for (size_t i = 0; i < fns.size(); ++i) {
    auto args = json_schema_part(fns[i].parameters, "f" + std::to_string(i) + "-", rules);
    if (!args.ok()) return err("tool '%s' parameters: %s", fns[i].name.c_str(), args.message().c_str());
    alt += (alt.empty() ? "" : " | ") + head(fns[i].name) + " " + *args + " " + tail;
  }
  return alt;
}

// `{"name": NAME, "<key>": ARGS}` for each function.
Result<std::string> json_call(const std::vector<ToolFunction>& fns, const std::string& key,
                              std::string* rules) {
  return per_function(
      fns, rules,
      [&](const std::string& name) {
        return "\"{\" ws \"\\\"name\\\"\" ws \":\" ws " + lit(json(name).dump()) + " ws \",\" ws " +
               lit("\"" + key + "\"") + " ws \":\" ws";
      },
      "ws \"}\"");
}

bool is_string_schema(const json& s) {
  return s.is_object() && s.contains("type") && s["type"] == "string";
}

// A DSML string parameter's raw text (string="true") under its schema: an enum / const of strings as
// those texts, minLength / maxLength as that many characters other than '<', else any text; nullopt
// for what raw text cannot express (pattern, format): such a string is written as JSON (string="false").
std::optional<std::string> dsml_raw_string(const json& s) {
  std::vector<json> choices;
  if (auto e = s.find("enum"); e != s.end() && e->is_array()) choices.assign(e->begin(), e->end());
  if (auto c = s.find("const"); c != s.end()) choices = {*c};
  if (!choices.empty()) {
    std::string alt;
    for (const json& c : choices) {
      if (!c.is_string() || c.get<std::string>().find('<') != std::string::npos) return std::nullopt;
      alt += (alt.empty() ? "" : " | ") + lit(c.get<std::string>());
    }
    return "(" + alt + ")";
  }
  if (s.contains("pattern") || s.contains("format")) return std::nullopt;
  if (!s.contains("minLength") && !s.contains("maxLength")) return std::string("dsml-text");
  const auto bound = [&](const char* k) -> int64_t {
    auto it = s.find(k);
    return it != s.end() && it->is_number_unsigned() ? it->get<int64_t>() : -1;
  };
  const int64_t lo = std::max<int64_t>(bound("minLength"), 0), hi = bound("maxLength");
  if (hi >= 0 && hi < lo) return std::nullopt;  // the JSON path names the error
  return "[^<]{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "}";
}

// DSML: an invoke per function, its parameters in the schema's order (optional ones may be left out),
// strings as they are (within their schema: dsml_raw_string), other values as JSON; a schema without
// properties takes any parameters.
Result<std::string> dsml_invoke(const std::vector<ToolFunction>& fns, std::string* rules) {
  std::string alt;
  for (size_t i = 0; i < fns.size(); ++i) {
    const json& p = fns[i].parameters;
    std::string params, unused;
    bool may_be_empty = true;  // no required parameter: the template writes an empty line then
    // The whole schema is checked as the JSON syntaxes check it (its keywords supported).
    if (auto whole = json_schema_part(p, "v-", &unused); !whole.ok())
      return err("tool '%s' parameters: %s", fns[i].name.c_str(), whole.message().c_str());
    if (p.is_object() && p.contains("properties") && p["properties"].is_object()) {
      const json req = p.value("required", json::array());
      size_t j = 0;
      for (const auto& [key, schema] : p["properties"].items()) {
        const std::string open = "<" + kDsml + "parameter name=\"" + key + "\" string=\"";
        const std::string close = lit("</" + kDsml + "parameter>\n");
        std::string one;
        const std::optional<std::string> raw =
            is_string_schema(schema) ? dsml_raw_string(schema) : std::optional<std::string>();
        if (raw) {
          one = lit(open + "true\">") + " " + *raw + " " + close;
        } else {
          const std::string prefix = "f" + std::to_string(i) + "-p" + std::to_string(j) + "-";
          auto v = json_schema_part(schema, prefix, rules);
          if (!v.ok())
            return err("tool '%s' parameter '%s': %s", fns[i].name.c_str(), key.c_str(), v.message().c_str());
          one = lit(open + "false\">") + " " + *v + " " + close;
        }
        const bool required = req.is_array() && std::find(req.begin(), req.end(), json(key)) != req.end();
        params += " (" + one + ")" + (required ? "" : "?");
        may_be_empty = may_be_empty && !required;
        ++j;
      }
    } else {
      params = " dsml-any-param*";
    }
    alt += (alt.empty() ? "" : " | ") + lit("<" + kDsml + "invoke name=\"" + fns[i].name + "\">\n") + params +
           (may_be_empty ? " \"\\n\"?" : "") + " " + lit("</" + kDsml + "invoke>\n");
  }
  *rules += "dsml-text ::= ([^<] | \"<\" [^/])*\n";
  *rules += "dsml-any-param ::= " + lit("<" + kDsml + "parameter name=\"") + " [a-zA-Z0-9_.-]+ " +
            "(\"\\\" string=\\\"true\\\">\" dsml-text | \"\\\" string=\\\"false\\\">\" value) " +
            lit("</" + kDsml + "parameter>\n") + "\n";
  return alt;
}

}  // namespace

Result<std::string> tool_calls_grammar(ToolSyntax syntax, const std::vector<ToolFunction>& fns,
                                       const ToolGrammarOptions& o) {
  if (fns.empty()) return err("no tools to call");
  std::string rules, root;
  auto L = [&](const std::string& text) { return seq(text, o.tokens); };
  // More calls after the first (parallel_tool_calls), each after `sep`.
  auto more = [&](const std::string& sep) {
    return o.parallel ? " (" + sep + " tool-call)*" : std::string();
  };
  switch (syntax) {
    case ToolSyntax::hermes: {
      STRATA_ASSIGN(std::string call, json_call(fns, "arguments", &rules));
      rules += "tool-call ::= " + L("<tool_call>") + " \"\\n\"? (" + call + ") \"\\n\"? " +
               L("</tool_call>") + "\n";
      root = "tool-call" + more("\"\\n\"{0,2}");
      break;
    }
    case ToolSyntax::llama3: {
      STRATA_ASSIGN(std::string call, json_call(fns, "parameters", &rules));
      // The trigger is `{"name"`: no space inside the call's opening.
      std::string tight = call;
      for (size_t at = 0; (at = tight.find("\"{\" ws \"\\\"name", at)) != std::string::npos;)
        tight.replace(at, 6, "\"{\"");
      rules += "tool-call ::= " + tight + "\n";
      root = std::string(o.required ? "(" + L("<|python_tag|>") + ")? " : "") + "tool-call" + more("\"\\n\"");
      break;
    }
    case ToolSyntax::mistral: {
      STRATA_ASSIGN(std::string call, json_call(fns, "arguments", &rules));
      rules += "tool-call ::= " + call + "\n";
      root = L("[TOOL_CALLS]") + " \"[\" ws tool-call" + more("ws \",\" ws") + " ws \"]\"";
      break;
    }
    case ToolSyntax::harmony: {
      STRATA_ASSIGN(
          std::string call,
          per_function(
              fns, &rules, [&](const std::string& name) { return L(name + " <|constrain|>json<|message|>"); },
              ""));
      rules += "tool-call ::= " + L("<|channel|>commentary to=functions.") + " (" + call + ") " +
               L("<|call|>") + "\n";
      rules += "analysis ::= " + L("<|channel|>analysis<|message|>") + " ([^<] | \"<\" [^|])* " +
               L("<|end|><|start|>assistant") + "\n";
      root = std::string(o.required && o.thinking ? "analysis? " : "") + "tool-call" +
             more(L("<|start|>assistant"));
      break;
    }
    case ToolSyntax::dsml: {
      STRATA_ASSIGN(std::string invoke, dsml_invoke(fns, &rules));
      rules += "invoke ::= " + invoke + "\n";
      root = L("<" + kDsml + "tool_calls>\n") + " invoke" + (o.parallel ? "+" : "") + " " +
             L("</" + kDsml + "tool_calls>");
      if (o.required)
        root = std::string(o.thinking ? "dsml-text \"</think>\" " : "") + "\"\\n\"{0,2} " + root;
      break;
    }
  }
  return "root ::= " + root + "\n" + rules + json_grammar_primitives();
}

}  // namespace strata::server
