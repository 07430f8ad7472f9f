// Tools, assistant tool calls and tool results written into a chat's messages in the model's syntax,
// and the lazy grammar of its calls (server/tool_calls.h). The texts are those of Qwen3's and
// DeepSeek-V4's Jinja templates (llama.cpp's models/templates).
#include <algorithm>

#include "server/json_schema_grammar.h"
#include "server/tool_calls.h"

namespace strata::server {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kDsml = "｜DSML｜";

constexpr const char* kHermesHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
constexpr const char* kHermesTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call>";

std::string dsml_head() {
  const std::string d(kDsml);
  return "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke "
         "tools "
         "by writing a \"<" +
         d + "tool_calls>\" block like the following:\n\n<" + d + "tool_calls>\n<" + d +
         "invoke name=\"$TOOL_NAME\">\n<" + d +
         "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + d +
         "parameter>\n...\n</" + d + "invoke>\n<" + d + "invoke name=\"$TOOL_NAME2\">\n...\n</" + d +
         "invoke>\n</" + d +
         "tool_calls>\n\nString parameters should be specified as is and set `string=\"true\"`. For all "
         "other "
         "types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
         "`string=\"false\"`."
         "\n\nIf thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
         "inside <think>...</think> BEFORE any tool calls or final response.\n\nOtherwise, output directly "
         "after </think> with tool calls or final response.\n\n### Available Tool Schemas\n\n";
}
constexpr const char* kDsmlTail =
    "\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

// JSON as Python's json.dumps writes it by default (", " and ": "), which the templates' tojson is.
void py_json(const ojson& j, std::string* out) {
  if (j.is_object()) {
    *out += '{';
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      if (!first) *out += ", ";
      first = false;
      *out += ojson(k).dump(-1, ' ', false, ojson::error_handler_t::replace);
      *out += ": ";
      py_json(v, out);
    }
    *out += '}';
  } else if (j.is_array()) {
    *out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i > 0) *out += ", ";
      py_json(j[i], out);
    }
    *out += ']';
  } else {
    *out += j.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }
}
std::string py_json(const ojson& j) {
  std::string s;
  py_json(j, &s);
  return s;
}

// One call's arguments as an object (OpenAI sends them as a JSON string).
Result<ojson> call_arguments(const ojson& fn, size_t msg) {
  auto a = fn.find("arguments");
  if (a == fn.end() || a->is_null()) return ojson::object();
  if (!a->is_string()) return *a;
  ojson v = ojson::parse(a->get<std::string>(), nullptr, false);
  if (v.is_discarded())
    return err("messages[%zu].tool_calls: arguments %s are not JSON", msg, a->get<std::string>().c_str());
  return v;
}

Status write_calls(ToolSyntax syntax, const ojson& calls, size_t msg, std::string* content) {
  const std::string d(kDsml);
  if (syntax == ToolSyntax::dsml) *content += "\n\n<" + d + "tool_calls>\n";
  for (size_t k = 0; k < calls.size(); ++k) {
    const ojson& fn = calls[k]["function"];
    const std::string name = fn["name"].get<std::string>();
    STRATA_ASSIGN(ojson args, call_arguments(fn, msg));
    if (syntax == ToolSyntax::hermes) {
      if (k > 0 || !content->empty()) *content += "\n";
      const auto a = fn.find("arguments");
      const std::string text = a != fn.end() && a->is_string() ? a->get<std::string>() : py_json(args);
      *content += "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + text + "}\n</tool_call>";
      continue;
    }
    if (!args.is_object()) return err("messages[%zu].tool_calls[%zu]: arguments must be an object", msg, k);
    *content += "<" + d + "invoke name=\"" + name + "\">\n";
    for (const auto& [key, v] : args.items()) {
      *content +=
          "<" + d + "parameter name=\"" + key + "\" string=\"" + (v.is_string() ? "true" : "false") + "\">";
      *content += v.is_string() ? v.get<std::string>() : py_json(v);
      *content += "</" + d + "parameter>\n";
    }
    *content += "</" + d + "invoke>\n";
  }
  if (syntax == ToolSyntax::dsml) *content += "</" + d + "tool_calls>";
  return {};
}

}  // namespace

bool ChatTools::empty() const {
  return tools.empty() && std::all_of(calls.begin(), calls.end(), [](const ojson& c) { return c.is_null(); });
}

ToolSyntax tool_syntax_for(ChatFormat format) {
  return format == ChatFormat::deepseek4 ? ToolSyntax::dsml : ToolSyntax::hermes;
}

Status apply_chat_tools(ChatFormat format, const ChatTools& t, std::vector<ChatMessage>* messages) {
  const ToolSyntax syntax = tool_syntax_for(format);
  const std::vector<std::string_view> roles = chat_format_roles(format);
  auto has_role = [&](std::string_view r) { return std::find(roles.begin(), roles.end(), r) != roles.end(); };
  for (size_t i = 0; i < messages->size() && i < t.calls.size(); ++i)
    if (!t.calls[i].is_null()) STRATA_TRY(write_calls(syntax, t.calls[i], i, &(*messages)[i].content));
  // Tool results: Qwen's user turns of <tool_response> blocks, where the format has no tool role of
  // its own (chatml's is not what Qwen was trained on).
  if (syntax == ToolSyntax::hermes && (format == ChatFormat::chatml || !has_role("tool"))) {
    std::vector<ChatMessage> out;
    bool prev_tool = false;
    for (ChatMessage& m : *messages) {
      const bool tool = m.role == "tool";
      const std::string block = "<tool_response>\n" + m.content + "\n</tool_response>";
      if (tool && prev_tool) {
        out.back().content += "\n" + block;
      } else if (tool) {
        out.push_back(ChatMessage{"user", block});
      } else {
        out.push_back(std::move(m));
      }
      prev_tool = tool;
    }
    *messages = std::move(out);
  }
  if (t.tools.empty()) return {};
  std::string text;
  if (syntax == ToolSyntax::hermes) {
    text = kHermesHead;
    for (const ojson& tool : t.tools) text += "\n" + py_json(tool);
    text += kHermesTail;
  } else {
    text = dsml_head();
    for (const ojson& tool : t.tools)
      if (tool.value("type", "") == "function") text += py_json(tool["function"]) + "\n";
    text += kDsmlTail;
  }
  if (syntax == ToolSyntax::dsml) {  // every system message is joined at the start: this one last
    messages->push_back(ChatMessage{"system", std::move(text)});
  } else if (!messages->empty() &&
             (messages->front().role == "system" || messages->front().role == "developer")) {
    messages->front().content += "\n\n" + text;
  } else if (has_role("system")) {
    messages->insert(messages->begin(), ChatMessage{"system", std::move(text)});
  } else if (!messages->empty()) {
    messages->front().content = text + "\n\n" + messages->front().content;
  }
  return {};
}

std::string tool_call_trigger(ToolSyntax syntax) {
  return syntax == ToolSyntax::dsml ? "<" + std::string(kDsml) + "tool_calls>" : "<tool_call>";
}

Result<std::string> tool_call_lazy_grammar(ToolSyntax syntax, const std::vector<ToolFunction>& fns,
                                           bool parallel) {
  if (syntax != ToolSyntax::hermes) return err("DSML tool calls are parsed, not grammar-constrained");
  STRATA_ASSIGN(std::string call, tool_call_grammar(fns, "tool-call-json"));
  const std::string one = "tool-call ::= \"<tool_call>\" \"\\n\"? tool-call-json \"\\n\"? \"</tool_call>\"\n";
  const std::string root =
      parallel ? "root ::= tool-call (\"\\n\"{0,2} tool-call)*\n" : "root ::= tool-call\n";
  return root + one + call;
}

}  // namespace strata::server
