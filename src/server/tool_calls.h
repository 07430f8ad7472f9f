// OpenAI tool calls in a model's own syntax (server/openai_api.h): the tools, the history's calls and
// results written as the model's template does, its replies parsed back into calls, and the grammar
// of its calls. The syntax follows the chat format (tool_syntax_for):
//
//   hermes   Qwen 2.5 / 3 and Hermes (chatml), and the fallback of every format below not listed:
//            the tools in the system message as Qwen3's template writes them, a call
//            `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, a tool result
//            `<tool_response>\n...\n</tool_response>` in a user turn (formats with a tool role keep it).
//   dsml     DeepSeek-V4 (deepseek4): the template's "## Tools" block after the system prompt, calls
//            as `<｜DSML｜tool_calls>` blocks of `<｜DSML｜invoke name="f">` with one
//            `<｜DSML｜parameter name="k" string="true|false">v</｜DSML｜parameter>` per argument.
//   llama3   Llama 3.1 / 3.2 JSON calls (llama3): the tools as JSON (indent 4) before the first user
//            message, as their template writes them; a call `{"name": "f", "parameters": {...}}`
//            (after an optional `<|python_tag|>`; several separated by newlines); results in the
//            ipython turn.
//   mistral  Mistral v7 (mistral-v7, mistral-v7-tekken): `[AVAILABLE_TOOLS][...][/AVAILABLE_TOOLS]`
//            before the last user turn, calls `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`,
//            results `[TOOL_RESULTS]{"content": ..., "call_id": ...}[/TOOL_RESULTS]`.
//   harmony  gpt-oss (gpt-oss): the tools as harmony's TypeScript namespace in a developer message,
//            a call `<|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>`
//            (the next one after `<|start|>assistant`), results
//            `<|start|>functions.f to=assistant<|channel|>commentary<|message|>...<|end|>`.
//
// apply_chat_tools writes the tools and the history's calls and results into the messages (JSON as
// Python's json.dumps writes it, keys in the body's order, as the Jinja templates' tojson does), and
// text that goes between turns into ChatInserts (chat_apply_inserts renders both); ToolCallParser
// splits a reply into content and calls, incrementally for streaming (the text of a call is held
// back until it closes, or, under a grammar, its arguments go out as they come; a call that does not
// parse is given back as content, never an error);
// tool_calls_grammar gives the GBNF of the calls: with tool_choice auto a lazy grammar (free text
// until tool_call_trigger, then only well-formed calls of the given tools), with required or a named
// function the whole reply (only calls; DeepSeek-V4's reasoning or gpt-oss's analysis first when
// thinking).
//
// Markers that are control tokens (tool_marker_tokens: Mistral's [TOOL_CALLS], Llama's
// <|python_tag|>, a Qwen <tool_call> added as special): the engine shows their text to the parser
// (CompletionParams::shown_tokens), the parser keeps them out of the content (as if not shown: a plain
// text spelling of such a marker is taken out too), and the grammar names them by id (`<[id]>`), so a
// required call emits the token and a lazy grammar triggers on it. An end-of-generation marker
// (gpt-oss's <|call|>) is never shown: the call it would close is parsed at the end of the reply.
//
//   ToolCallParser p(ToolSyntax::hermes);
//   ToolCallDelta d = p.feed(text);   // d.content: text to show now; d.calls: calls that closed
//   d = p.finish();                   // at the end of the reply
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace strata::server {

struct ToolFunction;

// The request's tools (the body's "tools" array, rendered only with tool_choice auto) and each
// message's tool_calls (null where it has none), in the body's key order.
struct ChatTools {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  std::vector<nlohmann::ordered_json> calls;  // one per message
  std::vector<std::string> result_ids;        // one per message: a tool message's tool_call_id, or ""
  bool empty() const;
};

enum class ToolSyntax { hermes, dsml, llama3, mistral, harmony };
// deepseek4: dsml; llama3: llama3; mistral-v7(-tekken): mistral; gpt-oss: harmony; else hermes.
ToolSyntax tool_syntax_for(ChatFormat format);

// Text written verbatim between turns: [i] before message i ([messages.size()]: after the last, before
// the reply's opening).
using ChatInserts = std::map<size_t, std::string>;

// Writes `tools` into `messages` (tools, assistant calls, tool results) for `format`, and the text
// that goes between turns into *inserts. Tool messages stay where a format has a tool role the model
// knows (deepseek4 writes <tool_result>, llama3 the ipython turn); else they become user turns
// wrapped in <tool_response> (hermes) or inserts (mistral, harmony). Errors: a call whose arguments
// are not JSON (or, where a syntax needs one, not an object).
Status apply_chat_tools(ChatFormat format, const ChatTools& tools, std::vector<ChatMessage>* messages,
                        ChatInserts* inserts);
// chat_apply with the inserts written between the turns (formats written turn by turn).
Result<std::string> chat_apply_inserts(ChatFormat format, std::span<const ChatMessage> messages,
                                       const ChatInserts& inserts, const ChatOptions& opts);

// The text that opens a call (where a lazy grammar starts).
std::string tool_call_trigger(ToolSyntax syntax);

// A syntax's markers that are single control tokens of a vocabulary (text, id): a model emits them as
// one token, which shows no text unless asked to (the server shows them to the parser, hides them
// from content, and the grammar names them by id).
using ToolMarkerTokens = std::vector<std::pair<std::string, int32_t>>;
// The markers of `syntax` (its calls' openings, closings and joiners) that are control tokens of `tok`.
ToolMarkerTokens tool_marker_tokens(ToolSyntax syntax, const Tokenizer& tok);

struct ToolGrammarOptions {
  bool parallel = true;   // several calls (else one)
  bool required = false;  // the grammar is the whole reply (else: from the trigger on)
  // required, thinking on: dsml's reply opens with reasoning up to "</think>"; harmony's may open with
  // an analysis channel message (else the reply is only calls: an untrained model could reason forever).
  bool thinking = false;
  ToolMarkerTokens tokens = {};  // markers written as their token (`<[id]>`), not as text
};
// GBNF of the calls of `fns` in `syntax`.
Result<std::string> tool_calls_grammar(ToolSyntax syntax, const std::vector<ToolFunction>& fns,
                                       const ToolGrammarOptions& opts);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text, compact, keys as the model wrote them
  // Streaming: the call was opened by an earlier delta (ToolCallDelta::opened) and this many bytes of
  // its arguments went out in args deltas.
  bool head_sent = false;
  size_t args_sent = 0;
};

struct ToolCallDelta {
  std::string content;          // text to show now
  std::vector<ToolCall> calls;  // calls that closed with this text
  // The call under way, after the closed ones (ToolCallParser's stream: its arguments as they come,
  // as vLLM and llama.cpp stream them): `opened` with its name when its arguments begin, then args_delta, the
  // next bytes of its compact arguments. Calls whose arguments are an object written after the name stream so
  // (hermes, llama3, harmony); others (mistral's arrays, dsml, keys in another order) come whole.
  bool opened = false;
  std::string open_name = {};
  std::string args_delta = {};
};

class ToolCallParser {
 public:
  // hidden: markers that are control tokens (shown to the parser only): never part of the content.
  // stream: a call's arguments stream as they come (ToolCallDelta::opened); only where a grammar
  // makes every call well-formed (else a call found malformed at its end is content, and a call
  // already opened could not be taken back). An opened call cut short (max_tokens) stays that partial
  // call, as vLLM's does, and its text is not content.
  explicit ToolCallParser(ToolSyntax syntax, std::vector<std::string> hidden = {}, bool stream = false);
  ToolCallDelta feed(std::string_view text);
  // The end of the reply: what was held back (an unclosed call that parses is a call; else text).
  ToolCallDelta finish();
  int n_calls() const { return n_calls_; }

 private:
  void scan(ToolCallDelta* d, bool at_end);
  void hide(ToolCallDelta* d) const;
  void emit_text(ToolCallDelta* d, std::string_view text, bool at_end);
  size_t held_suffix(std::string_view text) const;
  // The call under way: its name and where its arguments object starts in buf_, once shown.
  bool call_head(std::string* name, size_t* args_at) const;
  // The compact text of the arguments object that starts at buf_[at] (so far, or whole).
  std::string args_text(size_t at) const;
  void stream_args(ToolCallDelta* d);
  std::vector<std::string> hidden_;
  bool stream_ = false;
  ToolSyntax syntax_;
  std::string open_, close_;  // close_ empty: the call is one JSON value after open_ (llama3, mistral)
  bool keep_open_ = false;    // open_ is the call's own first text (llama3's `{"name"`)
  std::string joiner_;        // text before a call that is dropped with it (`<|python_tag|>`, ...)
  std::string buf_;           // outside a call: text not yet shown; inside: the call's text so far
  std::string held_ws_;       // trailing whitespace / joiners not shown yet (dropped before a call)
  bool inside_ = false;
  bool head_sent_ = false;  // stream: the call under way was opened in a delta
  size_t args_sent_ = 0;    // stream: bytes of its compact arguments given
  int n_calls_ = 0;
};

// The whole reply at once (what a non-streamed answer shows): the same split as feeding it to a
// parser in pieces.
ToolCallDelta parse_tool_calls(ToolSyntax syntax, std::string_view text,
                               std::vector<std::string> hidden = {});

}  // namespace strata::server
