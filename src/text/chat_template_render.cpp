// chat_apply: validates the messages against the format, then writes the table turns or runs
// the format's render function; and the render functions of the formats with control flow.
// Roles are validated before any render function runs, so they see only roles their table row
// accepts.
#include <cstdio>

#include "text/chat_template_spec.h"

namespace strata::chat_detail {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

void render_table(const FormatSpec& spec, std::span<const ChatMessage> messages, std::string* out) {
  for (const ChatMessage& m : messages) {
    const Turn& t = spec.turns[role_index(m.role)];
    if (t.flags & kTurnDrop) continue;
    *out += t.prefix;
    *out += (t.flags & kTurnTrim) ? trim_space(m.content) : std::string_view(m.content);
    *out += t.suffix;
  }
}

}  // namespace

std::string_view trim_space(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string quote_snippet(std::string_view s, size_t max_chars) {
  std::string q = "\"";
  const size_t n = s.size() < max_chars ? s.size() : max_chars;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      q += "\\n";
    } else if (c == '\t') {
      q += "\\t";
    } else if (c == '"' || c == '\\') {
      q += '\\';
      q += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      q += buf;
    } else {
      q += static_cast<char>(c);  // UTF-8 bytes pass through (a cut may split a character)
    }
  }
  q += '"';
  if (n < s.size()) q += "...";
  return q;
}

// Llama 2: "[INST] " opens every user turn (the first without BOS, the tokenizer adds it);
// system text goes inside the first turn, as <<SYS>> blocks where the variant has them and as
// plain text otherwise; an assistant reply ends with </s> and closes the turn.
void render_llama2(ChatFormat format, std::span<const ChatMessage> messages, const ChatOptions&,
                   std::string* out) {
  const bool sys_blocks = format != ChatFormat::llama2;
  const bool bos_in_history = format == ChatFormat::llama2_sys_bos;
  const bool strip = format == ChatFormat::llama2_sys_strip;
  *out += "[INST] ";
  bool in_turn = true;
  for (const ChatMessage& m : messages) {
    const std::string_view content = strip ? trim_space(m.content) : std::string_view(m.content);
    if (!in_turn) {
      *out += bos_in_history ? "<s>[INST] " : "[INST] ";
      in_turn = true;
    }
    const int role = role_index(m.role);
    if (role == kRoleSystem) {
      if (sys_blocks) {
        *out += "<<SYS>>\n";
        *out += content;
        *out += "\n<</SYS>>\n\n";
      } else {
        *out += content;
        *out += "\n";
      }
    } else if (role == kRoleUser) {
      *out += content;
      *out += " [/INST]";
    } else {
      *out += content;
      *out += "</s>";
      in_turn = false;
    }
  }
}

// Mistral's v1 / v3 / v3-tekken tokenizer templates: [INST] opens a turn that user and system
// text share (system text first, then a blank line); v1 puts a space before [INST] and [/INST],
// tekken writes no space after them, v3 trims the assistant's reply.
void render_mistral(ChatFormat format, std::span<const ChatMessage> messages, const ChatOptions&,
                    std::string* out) {
  const char* lead = format == ChatFormat::mistral_v1 ? " " : "";
  const char* trail = format == ChatFormat::mistral_v3_tekken ? "" : " ";
  const bool trim_reply = format == ChatFormat::mistral_v3;
  bool in_turn = false;
  for (const ChatMessage& m : messages) {
    if (!in_turn) {
      *out += lead;
      *out += "[INST]";
      *out += trail;
      in_turn = true;
    }
    const int role = role_index(m.role);
    if (role == kRoleSystem) {
      *out += m.content;
      *out += "\n\n";
    } else if (role == kRoleUser) {
      *out += m.content;
      *out += lead;
      *out += "[/INST]";
    } else {
      *out += trail;
      *out += trim_reply ? trim_space(m.content) : std::string_view(m.content);
      *out += "</s>";
      in_turn = false;
    }
  }
}

// AlphaMonarch: every message is "<s>ROLE\nCONTENT</s>\n", the first without its <s> (the
// tokenizer adds BOS).
void render_monarch(ChatFormat, std::span<const ChatMessage> messages, const ChatOptions&, std::string* out) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i > 0) *out += "<s>";
    *out += messages[i].role;
    *out += "\n";
    *out += messages[i].content;
    *out += "</s>\n";
  }
}

// Gemma has no system role: system text (trimmed, concatenated) opens the next user turn,
// followed by a blank line; the assistant is "model"; every content is trimmed.
void render_gemma(ChatFormat, std::span<const ChatMessage> messages, const ChatOptions&, std::string* out) {
  std::string pending_system;
  for (const ChatMessage& m : messages) {
    const int role = role_index(m.role);
    if (role == kRoleSystem) {
      pending_system += trim_space(m.content);
      continue;
    }
    const bool model = role == kRoleAssistant;
    *out += model ? "<start_of_turn>model\n" : "<start_of_turn>user\n";
    if (!model && !pending_system.empty()) {
      *out += pending_system;
      *out += "\n\n";
      pending_system.clear();
    }
    *out += trim_space(m.content);
    *out += "<end_of_turn>\n";
  }
}

// Orion has no system role: system text opens the next "Human: " turn, followed by a blank
// line. A user turn ends with the assistant's header and </s>.
void render_orion(ChatFormat, std::span<const ChatMessage> messages, const ChatOptions&, std::string* out) {
  std::string pending_system;
  for (const ChatMessage& m : messages) {
    const int role = role_index(m.role);
    if (role == kRoleSystem) {
      pending_system += m.content;
    } else if (role == kRoleUser) {
      *out += "Human: ";
      if (!pending_system.empty()) {
        *out += pending_system;
        *out += "\n\n";
        pending_system.clear();
      }
      *out += m.content;
      *out += "\n\nAssistant: </s>";
    } else {
      *out += m.content;
      *out += "</s>";
    }
  }
}

// RWKV world: "Role: text\n\n" turns ("\n\n" is the model's end of turn); a user message that
// is the last one is followed by "Assistant:" whatever add_assistant_prompt says.
void render_rwkv_world(ChatFormat, std::span<const ChatMessage> messages, const ChatOptions&,
                       std::string* out) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const int role = role_index(messages[i].role);
    *out += role == kRoleSystem ? "System: " : role == kRoleUser ? "User: " : "Assistant: ";
    *out += trim_space(messages[i].content);
    *out += "\n\n";
    if (role == kRoleUser && i + 1 == messages.size()) *out += "Assistant:";
  }
}

}  // namespace strata::chat_detail

namespace strata {

Result<std::string> chat_apply(ChatFormat format, std::span<const ChatMessage> messages,
                               const ChatOptions& opts) {
  using namespace chat_detail;
  const FormatSpec& spec = format_spec(format);
  if (messages.empty()) return err("chat format \"%s\": no messages", spec.name);
  size_t bytes = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const int role = role_index(m.role);
    if (role < 0 || !spec.turns[role].present()) {
      std::string roles;
      for (std::string_view r : chat_format_roles(format))
        roles += (roles.empty() ? "" : ", ") + std::string(r);
      return err("chat message %zu: role %s is not supported by chat format \"%s\" (roles: %s)", i,
                 quote_snippet(m.role, 40).c_str(), spec.name, roles.c_str());
    }
    if (role == kRoleSystem && i > 0 && spec.system_rule == SystemRule::first_only) {
      return err("chat message %zu: chat format \"%s\" takes a system message only as the first message", i,
                 spec.name);
    }
    bytes += m.content.size() + 64;
  }
  std::string out;
  out.reserve(bytes);
  out += spec.head;
  if (role_index(messages[0].role) != kRoleSystem) out += spec.head_without_system;
  if (spec.render) {
    spec.render(format, messages, opts, &out);
  } else {
    render_table(spec, messages, &out);
  }
  if (opts.add_assistant_prompt && !spec.writes_gen_prompt) out += spec.gen_prompt;
  return out;
}

}  // namespace strata
