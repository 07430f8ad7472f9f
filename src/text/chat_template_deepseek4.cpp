// The DeepSeek-V4 chat format (deepseek4): what llama.cpp's
// models/templates/deepseek-ai-DeepSeek-V4.jinja renders (the template llama.cpp's converter
// embeds in deepseek4 GGUFs); its tools block, DSML calls and tool results are written into the
// messages by the server (server/tool_calls.h):
//   BOS, then every system message's text, joined by a blank line, at the very start;
//   a run of user / developer / tool messages is one "<｜User｜>" turn, the messages separated by a
//   blank line, a tool message written as "<tool_result>TEXT</tool_result>";
//   an assistant message is "<｜Assistant｜>" + "</think>" + TEXT + "<｜end▁of▁sentence｜>"; with
//   thinking on, one after the last user turn (any, when the request has tools or the history a tool
//   result) writes "<think>" + its reasoning + "</think>" instead of the lone "</think>"; the reply
//   opens with "<｜Assistant｜></think>" (thinking off: a bare "</think>", not V3.2's empty pair) or
//   "<｜Assistant｜><think>".
// Checked against @huggingface/jinja rendering the template (tests/server/deepseek4_npm.mjs).
// With thinking on and chat_template_kwargs.reasoning_effort "max", the template's maximum-effort
// preamble comes first.
// As with every format here the BOS is left to the tokenizer (add_special = true): DeepSeek's
// tokenizers add <｜begin▁of▁sentence｜>.
#include "text/chat_template_spec.h"

namespace strata::chat_detail {

void render_deepseek4(ChatFormat, std::span<const ChatMessage> messages, const ChatOptions& opts,
                      std::string* out) {
  if (opts.thinking && opts.reasoning_max && !messages.empty())
    *out +=
        "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough in your "
        "thinking and comprehensively decompose the problem to resolve the root cause, rigorously "
        "stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
        "Explicitly write out your entire deliberation process, documenting every intermediate step, "
        "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
        "unchecked.\n\n";
  bool first_system = true;
  size_t last_user = messages.size();  // none
  bool has_tool_results = false;       // the template's ns.has_tool_calls
  for (size_t i = 0; i < messages.size(); ++i) {
    const int role = role_index(messages[i].role);
    if (role == kRoleTool) has_tool_results = true;
    if (role == kRoleSystem) {
      if (!first_system) *out += "\n\n";
      *out += messages[i].content;
      first_system = false;
    } else if (role != kRoleAssistant) {
      last_user = i;
    }
  }
  bool in_user = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const int role = role_index(m.role);
    if (role == kRoleSystem) continue;  // written above; it does not end a user turn
    if (role == kRoleAssistant) {
      in_user = false;
      *out += "<｜Assistant｜>";
      const bool after_last_user = last_user == messages.size() || i > last_user;
      if ((after_last_user || opts.has_tools || has_tool_results) && opts.thinking) {
        *out += "<think>";
        *out += m.reasoning_content;
      }
      *out += "</think>";
      *out += m.content;
      *out += "<｜end▁of▁sentence｜>";
      continue;
    }
    *out += in_user ? "\n\n" : "<｜User｜>";
    in_user = true;
    if (role == kRoleTool) {
      *out += "<tool_result>";
      *out += m.content;
      *out += "</tool_result>";
    } else {
      *out += m.content;
    }
  }
  if (opts.add_assistant_prompt) *out += opts.thinking ? "<｜Assistant｜><think>" : "<｜Assistant｜></think>";
}

}  // namespace strata::chat_detail
