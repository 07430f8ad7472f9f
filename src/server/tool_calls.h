// OpenAI tool calls in a model's own syntax, for tool_choice "auto" (server/openai_api.h):
//
//   hermes   Qwen 2.5 / 3 and Hermes (the chatml format), and the generic fallback of every other
//            format: the tools listed in the system message as Qwen3's template writes them, a call
//            written `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, a tool result
//            `<tool_response>\n...\n</tool_response>` in a user turn (formats with a tool role keep it).
//   dsml     DeepSeek-V4 (deepseek4): the template's "## Tools" block after the system prompt, calls
//            as `<｜DSML｜tool_calls>` blocks of `<｜DSML｜invoke name="f">` with one
//            `<｜DSML｜parameter name="k" string="true|false">v</｜DSML｜parameter>` per argument.
//
// apply_chat_tools writes the tools and the history's calls and results into the messages (JSON as
// Python's json.dumps writes it, keys in the body's order, as the Jinja templates' tojson does);
// ToolCallParser splits a reply into content and calls, incrementally for streaming (the text of a
// call is held back until it closes; a block that does not parse is given back as content, never an
// error); tool_call_trigger and tool_call_lazy_grammar give the lazy grammar: free text until the
// trigger, then only well-formed calls of the given tools (hermes; dsml is parsed, not constrained).
//
//   ToolCallParser p(ToolSyntax::hermes);
//   ToolCallDelta d = p.feed(text);   // d.content: text to show now; d.calls: calls that closed
//   d = p.finish();                   // at the end of the reply
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "text/chat_template.h"

namespace strata::server {

struct ToolFunction;

// The request's tools (the body's "tools" array, rendered only with tool_choice auto) and each
// message's tool_calls (null where it has none), in the body's key order.
struct ChatTools {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  std::vector<nlohmann::ordered_json> calls;  // one per message
  bool empty() const;
};

enum class ToolSyntax { hermes, dsml };
ToolSyntax tool_syntax_for(ChatFormat format);  // deepseek4: dsml; else hermes

// Writes `tools` into `messages` (tools, assistant calls, tool results) for `format`. Tool messages
// stay where a format has a tool role of its own (deepseek4 writes <tool_result>); else they become
// user turns wrapped in <tool_response>. Errors: a call whose arguments are not JSON.
Status apply_chat_tools(ChatFormat format, const ChatTools& tools, std::vector<ChatMessage>* messages);

// The text that opens a call, and the GBNF (root: one call, or several separated by newlines when
// `parallel`) that the text from the trigger on must match. dsml: an error (not constrained).
std::string tool_call_trigger(ToolSyntax syntax);
Result<std::string> tool_call_lazy_grammar(ToolSyntax syntax, const std::vector<ToolFunction>& fns,
                                           bool parallel);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text, compact, keys as the model wrote them
};

struct ToolCallDelta {
  std::string content;          // text to show now
  std::vector<ToolCall> calls;  // calls that closed with this text
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolSyntax syntax);
  ToolCallDelta feed(std::string_view text);
  // The end of the reply: what was held back (an unclosed call that parses is a call; else text).
  ToolCallDelta finish();
  int n_calls() const { return n_calls_; }

 private:
  void scan(ToolCallDelta* d, bool at_end);
  void emit_text(ToolCallDelta* d, std::string_view text, bool at_end);
  ToolSyntax syntax_;
  std::string open_, close_;
  std::string buf_;      // outside a call: text not yet shown; inside: the call's text so far
  std::string held_ws_;  // trailing whitespace not shown yet (dropped before a call)
  bool inside_ = false;
  int n_calls_ = 0;
};

// The whole reply at once (what a non-streamed answer shows): the same split as feeding it to a
// parser in pieces.
ToolCallDelta parse_tool_calls(ToolSyntax syntax, std::string_view text);

}  // namespace strata::server
