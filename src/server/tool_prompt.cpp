// Tools, assistant tool calls and tool results written into a chat's messages in the model's syntax,
// and the lazy grammar of its calls (server/tool_calls.h). The texts are those of Qwen3's and
// DeepSeek-V4's Jinja templates (llama.cpp's models/templates).
#include <algorithm>

#include "server/tool_calls.h"
#include "server/tool_prompt_detail.h"

namespace strata::server {

using ojson = nlohmann::ordered_json;

namespace tool_detail {

namespace {

void write_json(const ojson& j, int indent, int depth, std::string* out) {
  const std::string nl = indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string close = indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const char* sep = indent > 0 ? "," : ", ";
  if (j.is_object() && !j.empty()) {
    *out += '{';
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      if (!first) *out += sep;
      first = false;
      *out += nl;
      *out += ojson(k).dump(-1, ' ', false, ojson::error_handler_t::replace);
      *out += ": ";
      write_json(v, indent, depth + 1, out);
    }
    *out += close + '}';
  } else if (j.is_array() && !j.empty()) {
    *out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i > 0) *out += sep;
      *out += nl;
      write_json(j[i], indent, depth + 1, out);
    }
    *out += close + ']';
  } else {
    *out += j.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }
}

}  // namespace

std::string py_json(const ojson& j, int indent) {
  std::string s;
  write_json(j, indent, 0, &s);
  return s;
}

Result<ojson> call_arguments(const ojson& fn, size_t msg) {
  auto a = fn.find("arguments");
  if (a == fn.end() || a->is_null()) return ojson::object();
  if (!a->is_string()) return *a;
  ojson v = ojson::parse(a->get<std::string>(), nullptr, false);
  if (v.is_discarded())
    return err("messages[%zu].tool_calls: arguments %s are not JSON", msg, a->get<std::string>().c_str());
  return v;
}

}  // namespace tool_detail

using tool_detail::call_arguments;
using tool_detail::py_json;

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
    if (args.empty()) *content += "\n";  // the template's `if not args`
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
  switch (format) {
    case ChatFormat::deepseek4:
      return ToolSyntax::dsml;
    case ChatFormat::llama3:
      return ToolSyntax::llama3;
    case ChatFormat::mistral_v7:
    case ChatFormat::mistral_v7_tekken:
      return ToolSyntax::mistral;
    case ChatFormat::gpt_oss:
      return ToolSyntax::harmony;
    default:
      return ToolSyntax::hermes;
  }
}

Status apply_chat_tools(ChatFormat format, const ChatTools& t, std::vector<ChatMessage>* messages,
                        ChatInserts* inserts) {
  const ToolSyntax syntax = tool_syntax_for(format);
  if (syntax != ToolSyntax::hermes && syntax != ToolSyntax::dsml)
    return tool_detail::apply_turn_tools(syntax, t, messages, inserts);
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

Result<std::string> chat_apply_inserts(ChatFormat format, std::span<const ChatMessage> messages,
                                       const ChatInserts& inserts, const ChatOptions& opts) {
  if (inserts.empty()) return chat_apply(format, messages, opts);
  std::string out;
  size_t begin = 0;
  ChatOptions run = opts;
  run.add_assistant_prompt = false;
  for (const auto& [at, text] : inserts) {
    if (at > messages.size()) return err("chat insert at %zu: only %zu messages", at, messages.size());
    if (at > begin) {
      STRATA_ASSIGN(std::string part, chat_apply(format, messages.subspan(begin, at - begin), run));
      out += part;
      begin = at;
    }
    out += text;
  }
  if (begin < messages.size()) {
    STRATA_ASSIGN(std::string part, chat_apply(format, messages.subspan(begin), opts));
    return out + part;
  }
  if (opts.add_assistant_prompt) {  // the reply's opening: a turn with and without it, compared
    const ChatMessage probe{"user", "x"};
    STRATA_ASSIGN(std::string with, chat_apply(format, std::span(&probe, 1), opts));
    STRATA_ASSIGN(std::string without, chat_apply(format, std::span(&probe, 1), run));
    out += with.substr(without.size());
  }
  return out;
}

std::string tool_call_trigger(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::hermes:
      return "<tool_call>";
    case ToolSyntax::dsml:
      return "<" + std::string(kDsml) + "tool_calls>";
    case ToolSyntax::llama3:
      return "{\"name\"";
    case ToolSyntax::mistral:
      return "[TOOL_CALLS]";
    case ToolSyntax::harmony:
      return "<|channel|>commentary to=functions.";
  }
  return "";
}

ToolMarkerTokens tool_marker_tokens(ToolSyntax syntax, const Tokenizer& tok) {
  std::vector<std::string> markers;
  switch (syntax) {
    case ToolSyntax::hermes:
      markers = {"<tool_call>", "</tool_call>"};
      break;
    case ToolSyntax::dsml:
      markers = {"<" + std::string(kDsml) + "tool_calls>", "</" + std::string(kDsml) + "tool_calls>"};
      break;
    case ToolSyntax::llama3:
      markers = {"<|python_tag|>"};
      break;
    case ToolSyntax::mistral:
      markers = {"[TOOL_CALLS]"};
      break;
    case ToolSyntax::harmony:
      markers = {"<|channel|>", "<|constrain|>", "<|message|>", "<|call|>", "<|start|>", "<|end|>"};
      break;
  }
  ToolMarkerTokens out;
  for (const std::string& m : markers)
    if (const int32_t id = tok.find_token(m); id >= 0 && tok.is_control(id)) out.emplace_back(m, id);
  return out;
}

}  // namespace strata::server
