// Tools, assistant tool calls and tool results for the syntaxes whose calls and results are written
// between turns (server/tool_calls.h): Llama 3.1's JSON calls, Mistral v7's [TOOL_CALLS] and
// gpt-oss harmony. The texts are those of the models' own Jinja templates (Llama 3.1 / 3.2,
// Mistral-Small-3, gpt-oss), written into strata's built-in formats' turns.
#include <algorithm>

#include "server/tool_calls.h"
#include "server/tool_prompt_detail.h"

namespace strata::server::tool_detail {

using ojson = nlohmann::ordered_json;

namespace {

constexpr const char* kLlama3Head =
    "Given the following functions, please respond with a JSON for a function call with its proper "
    "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
    "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n";

// A JSON Schema as harmony's TypeScript type.
std::string ts_type(const ojson& s) {
  if (!s.is_object()) return "any";
  if (auto e = s.find("enum"); e != s.end() && e->is_array() && !e->empty()) {
    std::string out;
    for (const ojson& v : *e) out += (out.empty() ? "" : " | ") + py_json(v);
    return out;
  }
  const std::string type = s.value("type", "");
  if (type == "string") return "string";
  if (type == "integer" || type == "number") return "number";
  if (type == "boolean") return "boolean";
  if (type == "null") return "null";
  if (type == "array") return (s.contains("items") ? ts_type(s["items"]) : std::string("any")) + "[]";
  if (type == "object") return "object";
  return "any";
}

// gpt-oss's developer message section: the tools as a TypeScript namespace.
std::string harmony_tools(const ojson& tools) {
  std::string out = "# Tools\n\n## functions\n\nnamespace functions {\n\n";
  for (const ojson& tool : tools) {
    if (tool.value("type", "") != "function" || !tool.contains("function")) continue;
    const ojson& f = tool["function"];
    if (f.contains("description") && f["description"].is_string())
      out += "// " + f["description"].get<std::string>() + "\n";
    out += "type " + f.value("name", "") + " = ";
    const ojson params = f.value("parameters", ojson::object());
    const ojson props = params.is_object() ? params.value("properties", ojson::object()) : ojson::object();
    if (!props.is_object() || props.empty()) {
      out += "() => any;\n\n";
      continue;
    }
    const ojson req = params.value("required", ojson::array());
    out += "(_: {\n";
    for (const auto& [k, v] : props.items()) {
      if (v.is_object() && v.contains("description") && v["description"].is_string())
        out += "// " + v["description"].get<std::string>() + "\n";
      const bool required = req.is_array() && std::find(req.begin(), req.end(), ojson(k)) != req.end();
      out += k + (required ? ": " : "?: ") + ts_type(v) + ",\n";
    }
    out += "}) => any;\n\n";
  }
  return out + "} // namespace functions";
}

struct Call {
  std::string name, id;
  ojson args;
};

Result<std::vector<Call>> calls_of(const ojson& calls, size_t msg) {
  std::vector<Call> out;
  for (size_t k = 0; k < calls.size(); ++k) {
    const ojson& fn = calls[k]["function"];
    STRATA_ASSIGN(ojson args, call_arguments(fn, msg));
    if (!args.is_object()) return err("messages[%zu].tool_calls[%zu]: arguments must be an object", msg, k);
    const std::string id =
        calls[k].contains("id") && calls[k]["id"].is_string() ? calls[k]["id"].get<std::string>() : "";
    out.push_back(Call{fn["name"].get<std::string>(), id, std::move(args)});
  }
  return out;
}

std::string call_text(ToolSyntax syntax, const std::vector<Call>& calls) {
  std::string out;
  if (syntax == ToolSyntax::mistral) {
    for (const Call& c : calls) {
      ojson j{{"name", c.name}, {"arguments", c.args}};
      if (!c.id.empty()) j["id"] = c.id;
      out += (out.empty() ? "[TOOL_CALLS][" : ", ") + py_json(j);
    }
    return out + "]";
  }
  for (const Call& c : calls) {
    if (syntax == ToolSyntax::llama3) {
      out += (out.empty() ? "" : "\n") + std::string("{\"name\": \"") + c.name +
             "\", \"parameters\": " + py_json(c.args) + "}";
    } else {  // harmony
      out += (out.empty() ? "" : "<|start|>assistant") + std::string("<|channel|>commentary to=functions.") +
             c.name + " <|constrain|>json<|message|>" + py_json(c.args) + "<|call|>";
    }
  }
  return out;
}

}  // namespace

Status apply_turn_tools(ToolSyntax syntax, const ChatTools& t, std::vector<ChatMessage>* messages,
                        ChatInserts* inserts) {
  std::vector<ChatMessage> out;
  std::vector<Call> last_calls;  // the latest assistant calls (tool results answer them in order)
  size_t n_results = 0;
  auto insert = [&](std::string text) { (*inserts)[out.size()] += text; };
  for (size_t i = 0; i < messages->size(); ++i) {
    ChatMessage& m = (*messages)[i];
    const bool has_calls = i < t.calls.size() && !t.calls[i].is_null();
    if (has_calls) {
      STRATA_ASSIGN(last_calls, calls_of(t.calls[i], i));
      n_results = 0;
      const std::string text = call_text(syntax, last_calls);
      if (syntax == ToolSyntax::harmony) {  // the calls are turns of their own
        if (!m.content.empty()) out.push_back(std::move(m));
        insert("<|start|>assistant" + text);
        continue;
      }
      m.content += (m.content.empty() ? "" : "\n") + text;
      out.push_back(std::move(m));
      continue;
    }
    if (m.role != "tool" || syntax == ToolSyntax::llama3) {  // llama3 writes results in the ipython turn
      out.push_back(std::move(m));
      continue;
    }
    // The call a result answers: the one its tool_call_id names, else the next in order.
    const Call* call = n_results < last_calls.size() ? &last_calls[n_results] : nullptr;
    const std::string& named = i < t.result_ids.size() ? t.result_ids[i] : std::string();
    for (const Call& c : last_calls)
      if (!named.empty() && c.id == named) call = &c;
    ++n_results;
    if (syntax == ToolSyntax::mistral) {
      ojson j{{"content", m.content}};
      const std::string id = !named.empty() ? named : call ? call->id : "";
      if (!id.empty()) j["call_id"] = id;
      insert("[TOOL_RESULTS]" + py_json(j) + "[/TOOL_RESULTS]");
    } else {
      if (!call && !last_calls.empty()) call = &last_calls.back();
      insert("<|start|>functions." + (call ? call->name : std::string("unknown")) +
             " to=assistant<|channel|>commentary<|message|>" + m.content + "<|end|>");
    }
  }
  *messages = std::move(out);
  if (t.tools.empty()) return {};
  if (syntax == ToolSyntax::mistral) {  // before the last user turn
    size_t at = messages->size();
    for (size_t i = messages->size(); i-- > 0;)
      if ((*messages)[i].role == "user") {
        at = i;
        break;
      }
    (*inserts)[at] += "[AVAILABLE_TOOLS]" + py_json(t.tools) + "[/AVAILABLE_TOOLS]";
    return {};
  }
  if (syntax == ToolSyntax::llama3) {  // before the first user message's text
    std::string text = kLlama3Head;
    for (const ojson& tool : t.tools) text += py_json(tool, 4) + "\n\n";
    auto user = std::find_if(messages->begin(), messages->end(),
                             [](const ChatMessage& m) { return m.role == "user"; });
    if (user != messages->end()) {
      user->content = text + user->content;
    } else {
      messages->insert(messages->begin(), ChatMessage{"system", text});
    }
    return {};
  }
  // harmony: a developer message (after a leading system message) holds the tools.
  const std::string text = harmony_tools(t.tools);
  auto dev = std::find_if(messages->begin(), messages->end(),
                          [](const ChatMessage& m) { return m.role == "developer"; });
  if (dev != messages->end()) {
    dev->content += "\n\n" + text;
    return {};
  }
  const size_t at = !messages->empty() && messages->front().role == "system" ? 1 : 0;
  messages->insert(messages->begin() + static_cast<std::ptrdiff_t>(at), ChatMessage{"developer", text});
  // Inserts after the new message move one place on.
  ChatInserts moved;
  for (auto& [k, v] : *inserts) moved[k >= at ? k + 1 : k] = std::move(v);
  *inserts = std::move(moved);
  return {};
}

}  // namespace strata::server::tool_detail
