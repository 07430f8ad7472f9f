// Chat format lookup: by name, by the markers of a Jinja template (llama.cpp's
// llm_chat_detect_template order, de3ff81), and the server's choice from --chat-template, the
// model's template (GGUF tokenizer.chat_template or a checkpoint's tokenizer_config.json), the
// architecture's format and the chatml fallback.
#include "text/chat_template.h"

#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/safetensors_dir.h"
#include "text/chat_template_spec.h"

namespace strata {
namespace {

using chat_detail::quote_snippet;
using F = ChatFormat;

// One detection rule: every non-empty `all` marker occurs, and when `any` is given, at least
// one of its markers occurs too. Rules are tried in order; the first that holds wins.
struct Rule {
  ChatFormat format;
  std::array<std::string_view, 4> all;
  std::array<std::string_view, 2> any = {};
};

// The markers after the ChatML and [INST] families (detect_inst handles those). Strings with
// \\n are template source text: a backslash and an n inside a Jinja string literal.
constexpr Rule kRules[] = {
    {F::phi3, {"<|assistant|>", "<|end|>"}},
    {F::chatglm4, {"[gMASK]<sop>"}},
    {F::exaone_moe, {"<|assistant|>", "<|user|>", "<|tool_declare|>"}},
    {F::falcon3, {"<|assistant|>", "<|user|>", "</s>"}},
    {F::glmedge, {"<|assistant|>", "<|user|>"}},
    {F::glmedge, {"<|{{ item['role'] }}|>", "<|begin_of_image|>"}},
    {F::zephyr, {"<|user|>", "<|endoftext|>"}},
    {F::monarch, {"bos_token + message['role']"}},
    {F::gemma, {"<start_of_turn>"}},
    {F::orion, {"'\\n\\nAssistant: ' + eos_token"}},
    {F::openchat, {"GPT4 Correct "}},
    {F::vicuna_orca, {"USER: ", "ASSISTANT: ", "SYSTEM: "}},
    {F::vicuna, {"USER: ", "ASSISTANT: "}},
    {F::deepseek, {"### Instruction:", "<|EOT|>"}},
    {F::command_r, {"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"}},
    {F::llama3, {"<|start_header_id|>", "<|end_header_id|>"}},
    {F::chatglm3, {"[gMASK]sop"}},
    {F::minicpm, {"<用户>"}},
    {F::deepseek2, {"'Assistant: ' + message['content'] + eos_token"}},
    // DeepSeek-V4's template: V3's markers plus its DSML tool-call token (before deepseek3).
    {F::deepseek4, {"<｜Assistant｜>", "<｜User｜>", "｜DSML｜"}},
    {F::deepseek3, {"<｜Assistant｜>", "<｜User｜>", "<｜end▁of▁sentence｜>"}},
    {F::exaone4, {"[|system|]", "[|assistant|]", "[|endofturn|]", "[|tool|]"}},
    {F::exaone3, {"[|system|]", "[|assistant|]", "[|endofturn|]"}},
    {F::rwkv_world, {}, {"rwkv-world", "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"}},
    {F::granite_4_0, {"<|start_of_role|>", "g4_default_system_message"}, {"<tool_call>", "<tools>"}},
    {F::granite_4_1, {"<|start_of_role|>"}, {"<tool_call>", "<tools>"}},
    {F::granite, {"<|start_of_role|>"}},
    {F::gigachat,
     {"message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"}},
    {F::megrez, {"<|role_start|>"}},
    {F::yandex, {" Ассистент:"}},
    {F::bailing, {"<role>ASSISTANT</role>", "'HUMAN'"}},
    {F::bailing_think, {"<role>ASSISTANT</role>", "\"HUMAN\"", "<think>"}},
    {F::bailing2, {"<role>ASSISTANT</role>", "<role>HUMAN</role>", "<|role_end|>"}},
    {F::llama4, {"<|header_start|>", "<|header_end|>"}},
    {F::dots1, {"<|endofuserprompt|>"}},
    {F::hunyuan_moe, {"<|extra_0|>", "<|extra_4|>"}},
    {F::gpt_oss, {"<|start|>", "<|channel|>"}},
    {F::hunyuan_vl, {"<｜hy_Assistant｜>", "<｜hy_begin▁of▁sentence｜>"}},
    {F::hunyuan_dense, {"<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁3｜>"}},
    {F::kimi_k2, {"<|im_assistant|>assistant<|im_middle|>"}},
    {F::seed_oss, {"<seed:bos>"}},
    {F::grok2, {"'Assistant: '  + message['content'] + '<|separator|>"}},
    {F::pangu_embedded, {"[unused9]系统：[unused10]"}},
    {F::solar_open, {"<|begin|>", "<|end|>", "<|content|>"}},
};

bool contains(std::string_view s, std::string_view marker) {
  return s.find(marker) != std::string_view::npos;
}

bool rule_holds(const Rule& rule, std::string_view tmpl) {
  for (std::string_view m : rule.all) {
    if (!m.empty() && !contains(tmpl, m)) return false;
  }
  if (rule.any[0].empty()) return true;
  for (std::string_view m : rule.any) {
    if (!m.empty() && contains(tmpl, m)) return true;
  }
  return false;
}

// Templates with [INST] (or named "mistral..."): Mistral's tokenizer templates by their
// system-prompt and tool markers, else Llama 2 and its variants.
ChatFormat detect_inst(std::string_view tmpl) {
  if (contains(tmpl, "[SYSTEM_PROMPT]")) return F::mistral_v7;
  if (contains(tmpl, "' [INST] ' + system_message") || contains(tmpl, "[AVAILABLE_TOOLS]")) {
    if (contains(tmpl, " [INST]")) return F::mistral_v1;
    if (contains(tmpl, "\"[INST]\"")) return F::mistral_v3_tekken;
    return F::mistral_v3;
  }
  if (contains(tmpl, "content.strip()")) return F::llama2_sys_strip;
  if (contains(tmpl, "bos_token + '[INST]")) return F::llama2_sys_bos;
  if (contains(tmpl, "<<SYS>>")) return F::llama2_sys;
  return F::llama2;
}

std::optional<ChatFormat> find_name(std::string_view name) {
  if (name == "qwen") return F::chatml;
  for (int i = 0; i < kChatFormatCount; ++i) {
    const auto f = static_cast<ChatFormat>(i);
    if (name == chat_format_name(f)) return f;
  }
  return std::nullopt;
}

}  // namespace

Result<ChatFormat> chat_format_by_name(std::string_view name) {
  if (auto f = find_name(name)) return *f;
  return err("unknown chat format %s (one of: %s; \"qwen\" = chatml)", quote_snippet(name, 60).c_str(),
             chat_format_names_joined().c_str());
}

Result<ChatFormat> chat_format_detect(std::string_view tmpl) {
  if (auto f = find_name(tmpl)) return *f;
  if (contains(tmpl, "<|im_start|>")) {
    if (contains(tmpl, "<|im_sep|>")) return F::phi4;
    // SmolVLM starts with <|im_start|> as its BOS but its turns are not ChatML.
    if (contains(tmpl, "<end_of_utterance>")) return F::smolvlm;
    return F::chatml;
  }
  if (tmpl.starts_with("mistral") || contains(tmpl, "[INST]")) return detect_inst(tmpl);
  for (const Rule& rule : kRules) {
    if (rule_holds(rule, tmpl)) return rule.format;
  }
  return err(
      "unsupported chat template %s (%zu bytes; no built-in format matches its markers; built-in "
      "formats: %s)",
      quote_snippet(tmpl, 60).c_str(), tmpl.size(), chat_format_names_joined().c_str());
}

const char* chat_format_source_name(ChatFormatSource source) {
  switch (source) {
    case ChatFormatSource::override_arg:
      return "--chat-template";
    case ChatFormatSource::model_template:
      return "model template";
    case ChatFormatSource::default_chatml:
      return "default (model has no template)";
    case ChatFormatSource::arch_default:
      return "the architecture's format (model has no template)";
  }
  return "?";
}

std::optional<ChatFormat> chat_format_for_arch(std::string_view arch) {
  if (arch == "deepseek4" || arch == "deepseek_v41") return F::deepseek4;
  if (arch == "gpt-oss") return F::gpt_oss;
  return std::nullopt;
}

Result<ChatFormatChoice> chat_format_choose(std::optional<std::string_view> model_template,
                                            std::string_view override_arg, std::string_view arch) {
  if (!override_arg.empty()) {
    auto f = chat_format_detect(override_arg);  // a built-in name, else a template's markers
    if (!f.ok()) return err_context("--chat-template", f.error());
    return ChatFormatChoice{*f, ChatFormatSource::override_arg};
  }
  // As llama.cpp: a model without a template (or with an empty one) gets chatml, unless its
  // architecture has a format of its own.
  if (!model_template || model_template->empty()) {
    if (auto f = chat_format_for_arch(arch)) return ChatFormatChoice{*f, ChatFormatSource::arch_default};
    return ChatFormatChoice{F::chatml, ChatFormatSource::default_chatml};
  }
  auto f = chat_format_detect(*model_template);
  if (!f.ok()) {
    return err_context(std::string(kChatTemplateKey), Error{f.message() + "; pass --chat-template NAME"});
  }
  return ChatFormatChoice{*f, ChatFormatSource::model_template};
}

Result<std::optional<std::string>> chat_template_of_model(const GgufFile& file) {
  if (!file.find(kChatTemplateKey)) return std::optional<std::string>();
  auto s = file.get_string(kChatTemplateKey);
  if (!s.ok()) return err_context(file.path(), s.error());
  return std::optional<std::string>(std::move(s).value());
}

Result<ChatFormatChoice> chat_format_for_model(const GgufFile& file, std::string_view override_arg) {
  STRATA_ASSIGN(std::optional<std::string> tmpl, chat_template_of_model(file));
  auto arch = file.get_string_or("general.architecture", "");
  if (!arch.ok()) return err_context(file.path(), arch.error());
  auto choice =
      chat_format_choose(tmpl ? std::optional<std::string_view>(*tmpl) : std::nullopt, override_arg, *arch);
  if (!choice.ok() && override_arg.empty()) return err_context(file.path(), choice.error());
  return choice;
}

Result<std::optional<std::string>> chat_template_of_dir(const std::string& dir, std::string* source_out) {
  std::optional<std::string> tmpl;
  std::string source;
  const std::string cfg_path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  if (std::filesystem::exists(cfg_path)) {
    auto text = read_text_file(cfg_path);
    if (!text.ok()) return text.error();
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return err("%s: not a JSON object", cfg_path.c_str());
    auto it = j.find("chat_template");
    if (it != j.end() && it->is_string()) {
      tmpl = it->get<std::string>();
    } else if (it != j.end() && it->is_array()) {
      for (const auto& e : *it) {
        if (!e.is_object()) continue;
        auto name = e.find("name"), t = e.find("template");
        if (name != e.end() && *name == "default" && t != e.end() && t->is_string())
          tmpl = t->get<std::string>();
      }
      if (!tmpl) return err("%s: chat_template: a list without a \"default\" template", cfg_path.c_str());
    } else if (it != j.end() && !it->is_null()) {
      return err("%s: chat_template: not a string or a list of {name, template}", cfg_path.c_str());
    }
    source = cfg_path;
  }
  const std::string jinja_path = (std::filesystem::path(dir) / "chat_template.jinja").string();
  if (!tmpl && std::filesystem::exists(jinja_path)) {
    auto text = read_text_file(jinja_path);
    if (!text.ok()) return text.error();
    tmpl = std::move(*text);
    source = jinja_path;
  }
  if (source_out) *source_out = source;
  return tmpl;
}

Result<ChatFormatChoice> chat_format_for_dir(const std::string& dir, std::string_view arch,
                                             std::string_view override_arg) {
  std::string source;
  STRATA_ASSIGN(std::optional<std::string> tmpl, chat_template_of_dir(dir, &source));
  auto choice =
      chat_format_choose(tmpl ? std::optional<std::string_view>(*tmpl) : std::nullopt, override_arg, arch);
  if (!choice.ok() && override_arg.empty()) return err_context(source, choice.error());
  return choice;
}

}  // namespace strata
