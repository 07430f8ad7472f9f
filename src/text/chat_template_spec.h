// Internal to the chat_template*.cpp files: how each built-in chat format is described.
//
// Most formats are a table row: per role, a prefix and a suffix written around the message
// content (optionally trimmed), text written once at the start, and the text that opens the
// assistant's reply. Formats with control flow (llama2 and mistral turns, merged system
// prompts, ...) name a render function instead; the table still says which roles they accept.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "text/chat_template.h"

namespace strata::chat_detail {

enum Role : int { kRoleSystem, kRoleUser, kRoleAssistant, kRoleTool, kRoleDeveloper, kRoleCount };
inline constexpr const char* kRoleNames[kRoleCount] = {"system", "user", "assistant", "tool", "developer"};
int role_index(std::string_view role);  // -1 when not one of kRoleNames

enum TurnFlag : uint8_t {
  kTurnTrim = 1,  // content stripped of leading/trailing ASCII whitespace
  kTurnDrop = 2,  // accepted but not written (the model's own template ignores the role)
};

struct Turn {
  const char* prefix = nullptr;  // nullptr: the format has no such role
  const char* suffix = "";
  uint8_t flags = 0;
  constexpr bool present() const { return prefix != nullptr; }
};

enum class SystemRule : uint8_t {
  anywhere,
  first_only,  // a system message is accepted only as message 0
};

using RenderFn = void (*)(ChatFormat format, std::span<const ChatMessage> messages, const ChatOptions& opts,
                          std::string* out);

struct FormatSpec {
  ChatFormat format;
  const char* name;
  Turn turns[kRoleCount];
  const char* gen_prompt = "";           // appended when add_assistant_prompt (unless writes_gen_prompt)
  const char* head = "";                 // written before the first message
  const char* head_without_system = "";  // written after `head` when message 0 is not a system message
  SystemRule system_rule = SystemRule::anywhere;
  RenderFn render = nullptr;       // nullptr: the table turns are the whole format
  bool writes_gen_prompt = false;  // render writes the reply's opening itself (it depends on options)
};

const FormatSpec& format_spec(ChatFormat format);

// Leading and trailing bytes for which C isspace() is true, removed (llama.cpp's trim).
std::string_view trim_space(std::string_view s);
// A one-line, length-capped rendering of untrusted text for error messages: control bytes
// escaped (\n, \t, \xNN), "..." appended when cut.
std::string quote_snippet(std::string_view s, size_t max_chars);

// The render functions of the formats with control flow (chat_template_render.cpp).
void render_llama2(ChatFormat format, std::span<const ChatMessage> messages, const ChatOptions& opts,
                   std::string* out);
void render_mistral(ChatFormat format, std::span<const ChatMessage> messages, const ChatOptions& opts,
                    std::string* out);
void render_monarch(ChatFormat format, std::span<const ChatMessage> messages, const ChatOptions& opts,
                    std::string* out);
void render_gemma(ChatFormat format, std::span<const ChatMessage> messages, const ChatOptions& opts,
                  std::string* out);
void render_orion(ChatFormat format, std::span<const ChatMessage> messages, const ChatOptions& opts,
                  std::string* out);
void render_rwkv_world(ChatFormat format, std::span<const ChatMessage> messages, const ChatOptions& opts,
                       std::string* out);

void render_deepseek4(ChatFormat format, std::span<const ChatMessage> messages, const ChatOptions& opts,
                      std::string* out);

}  // namespace strata::chat_detail
