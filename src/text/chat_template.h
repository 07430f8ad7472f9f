// Chat templates: OpenAI-style messages -> the prompt text a model was trained on.
//
// A GGUF carries its chat template as a Jinja string (tokenizer.chat_template). Like llama.cpp's
// llama_chat_apply_template (llama-server without --jinja), these built-in formats run no Jinja:
// they recognise which well-known format a template is by characteristic substrings and write that
// format with built-in code (`strata serve --jinja` renders the template itself instead:
// chat_template_jinja.h). Format names and outputs match llama.cpp's built-in templates (de3ff81);
// where strata differs it says so in chat_template_formats.cpp (it rejects roles a format cannot
// write instead of guessing, and never drops a system message silently except where the
// model's own template does).
//
// The output holds no BOS: tokenize it with add_special = true (the vocab adds BOS as it says)
// and parse_special = true (so "<|im_start|>" becomes its control token).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"

namespace strata {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"; "tool" / "developer" where the format has them
  std::string content;
  // An assistant turn's reasoning: written only by formats with a thinking mode (deepseek4), and
  // there only for assistant turns after the last user turn when thinking is on.
  std::string reasoning_content = {};
};

struct ChatOptions {
  bool add_assistant_prompt = true;  // append the text that opens the assistant's reply
  // Formats with a thinking mode (deepseek4): open the reply with "<think>" (else the reply
  // starts with an empty reasoning block). Other formats ignore it.
  bool thinking = false;
  // deepseek4 with thinking on: its template's maximum-effort preamble first (chat_template_kwargs
  // .reasoning_effort "max").
  bool reasoning_max = false;
  // The request has tools: deepseek4 then keeps every assistant turn's reasoning when thinking (its
  // template's preserve_reasoning). Other formats ignore it (tools are written into the messages).
  bool has_tools = false;
};

// Built-in formats; chat_format_name gives llama.cpp's name for each.
enum class ChatFormat : uint8_t {
  chatml,  // also Qwen 1.5-3 ("qwen" is an alias name)
  llama2,
  llama2_sys,
  llama2_sys_bos,
  llama2_sys_strip,
  mistral_v1,
  mistral_v3,
  mistral_v3_tekken,
  mistral_v7,
  mistral_v7_tekken,
  phi3,
  phi4,
  falcon3,
  zephyr,
  monarch,
  gemma,
  orion,
  openchat,
  vicuna,
  vicuna_orca,
  deepseek,
  deepseek2,
  deepseek3,
  deepseek_ocr,
  command_r,
  llama3,
  chatglm3,
  chatglm4,
  glmedge,
  minicpm,
  exaone3,
  exaone4,
  exaone_moe,
  rwkv_world,
  granite,
  granite_4_0,
  granite_4_1,
  gigachat,
  megrez,
  yandex,
  bailing,
  bailing_think,
  bailing2,
  llama4,
  smolvlm,
  dots1,
  hunyuan_moe,
  gpt_oss,  // OpenAI harmony, as llama.cpp's built-in writes it (no channels)
  hunyuan_dense,
  hunyuan_vl,
  kimi_k2,
  seed_oss,
  grok2,
  pangu_embedded,
  solar_open,
  deepseek4,  // DeepSeek-V4 / V4.1 (llama.cpp's models/templates/deepseek-ai-DeepSeek-V4.jinja)
};
inline constexpr int kChatFormatCount = static_cast<int>(ChatFormat::deepseek4) + 1;

// "chatml", "llama2-sys", "mistral-v7", "gpt-oss", ... (llama.cpp's spelling).
const char* chat_format_name(ChatFormat format);
// Every format's name in enum order (for --chat-template help), and the same joined by ", ".
std::vector<std::string_view> chat_format_names();
std::string chat_format_names_joined();
// The roles a format accepts, in the order system, user, assistant, tool, developer.
std::vector<std::string_view> chat_format_roles(ChatFormat format);

// A built-in name (or the alias "qwen" = chatml); the error lists the valid names.
Result<ChatFormat> chat_format_by_name(std::string_view name);

// Which built-in format a Jinja chat template is, by the markers llama.cpp looks for, in its
// order. A string that is exactly a built-in name is that format (as in llama.cpp). An unknown
// template is an error quoting its first 60 characters and listing the built-in names.
Result<ChatFormat> chat_format_detect(std::string_view jinja_template);

// The prompt for `messages` in `format`; with add_assistant_prompt, the text that opens the
// assistant's reply is appended (formats whose user turn already opens it, e.g. llama2 and
// mistral, add nothing). Errors: no messages; a role the format cannot write (names the message
// index, the role and the roles it has); a system message after the first where a format takes
// one only at the start (gigachat, hunyuan-dense, hunyuan-vl).
Result<std::string> chat_apply(ChatFormat format, std::span<const ChatMessage> messages,
                               const ChatOptions& opts);
inline Result<std::string> chat_apply(ChatFormat format, std::span<const ChatMessage> messages,
                                      bool add_assistant_prompt) {
  return chat_apply(format, messages, ChatOptions{.add_assistant_prompt = add_assistant_prompt});
}

// Where a server's chat format came from.
enum class ChatFormatSource : uint8_t {
  override_arg,    // --chat-template (a built-in name or a Jinja template)
  model_template,  // the model's tokenizer.chat_template
  default_chatml,  // the model has no template: chatml, as llama.cpp falls back
  arch_default,    // the model has no template, its architecture has one (deepseek4, deepseek_v41, gpt-oss)
};
const char* chat_format_source_name(ChatFormatSource source);  // "--chat-template", ...

struct ChatFormatChoice {
  ChatFormat format = ChatFormat::chatml;
  ChatFormatSource source = ChatFormatSource::default_chatml;
};

inline constexpr std::string_view kChatTemplateKey = "tokenizer.chat_template";

// The format an architecture's models use when they carry no template: deepseek4 for "deepseek4"
// and "deepseek_v41" (the official checkpoints ship no Jinja template), gpt-oss for "gpt-oss" (its
// harmony format is the only one the model knows), else none.
std::optional<ChatFormat> chat_format_for_arch(std::string_view arch);

// The choice a server makes: a non-empty `override_arg` (a built-in name, else a Jinja template
// to detect) wins; else the model's template (nullopt: the model has none) is detected; else the
// architecture's format (chat_format_for_arch); else chatml. Errors say which of the two was
// unsupported.
Result<ChatFormatChoice> chat_format_choose(std::optional<std::string_view> model_template,
                                            std::string_view override_arg, std::string_view arch = {});
// A model's Jinja chat template: tokenizer.chat_template (nullopt: it has none; a non-string
// value is an error naming the file and key), or for a checkpoint directory tokenizer_config.json's
// "chat_template" (a string, or a list of {name, template} whose "default" entry is taken), else
// the file chat_template.jinja (*source: the file it came from; errors name it).
Result<std::optional<std::string>> chat_template_of_model(const GgufFile& file);
Result<std::optional<std::string>> chat_template_of_dir(const std::string& dir,
                                                        std::string* source = nullptr);

// The same, reading tokenizer.chat_template and general.architecture from the file (a
// non-string value is an error naming the file and key).
Result<ChatFormatChoice> chat_format_for_model(const GgufFile& file, std::string_view override_arg = {});
// The same for a checkpoint directory (its template as chat_template_of_dir finds it).
Result<ChatFormatChoice> chat_format_for_dir(const std::string& dir, std::string_view arch,
                                             std::string_view override_arg = {});

}  // namespace strata
