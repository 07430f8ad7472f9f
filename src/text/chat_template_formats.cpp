// The built-in chat formats, one table row each (see chat_template_spec.h), and the name and
// role queries of chat_template.h.
//
// Outputs match llama.cpp's built-in templates (llm_chat_apply_template, de3ff81) for the roles
// each format accepts here. Where strata differs:
//   - roles a format's own template has no place for are rejected (llama.cpp writes most of them
//     as if they were the assistant, or drops them);
//   - llama3 writes a "tool" message under the "ipython" header, as Llama 3.1's template does
//     (llama.cpp writes a "tool" header that the model was not trained on);
//   - gigachat, hunyuan-dense and hunyuan-vl take a system message only first (llama.cpp drops a
//     later one silently).
// yandex accepts and drops system messages, as its own template does and llama.cpp does.
#include <array>

#include "text/chat_template_spec.h"

namespace strata::chat_detail {
namespace {

constexpr Turn on(const char* prefix, const char* suffix = "") {
  return Turn{prefix, suffix, 0};
}
constexpr Turn trimmed(const char* prefix, const char* suffix = "") {
  return Turn{prefix, suffix, kTurnTrim};
}
constexpr Turn kNone{};
constexpr Turn kDropped{"", "", kTurnDrop};
// Formats written by a render function: the turn strings are unused, only presence counts.
constexpr Turn kCustom{"", "", 0};

using F = ChatFormat;

constexpr FormatSpec kSpecs[] = {
    {.format = F::chatml,
     .name = "chatml",
     .turns = {on("<|im_start|>system\n", "<|im_end|>\n"), on("<|im_start|>user\n", "<|im_end|>\n"),
               on("<|im_start|>assistant\n", "<|im_end|>\n"), on("<|im_start|>tool\n", "<|im_end|>\n"),
               kNone},
     .gen_prompt = "<|im_start|>assistant\n"},
    {.format = F::llama2, .name = "llama2", .turns = {kCustom, kCustom, kCustom}, .render = render_llama2},
    {.format = F::llama2_sys,
     .name = "llama2-sys",
     .turns = {kCustom, kCustom, kCustom},
     .render = render_llama2},
    {.format = F::llama2_sys_bos,
     .name = "llama2-sys-bos",
     .turns = {kCustom, kCustom, kCustom},
     .render = render_llama2},
    {.format = F::llama2_sys_strip,
     .name = "llama2-sys-strip",
     .turns = {kCustom, kCustom, kCustom},
     .render = render_llama2},
    {.format = F::mistral_v1,
     .name = "mistral-v1",
     .turns = {kCustom, kCustom, kCustom},
     .render = render_mistral},
    {.format = F::mistral_v3,
     .name = "mistral-v3",
     .turns = {kCustom, kCustom, kCustom},
     .render = render_mistral},
    {.format = F::mistral_v3_tekken,
     .name = "mistral-v3-tekken",
     .turns = {kCustom, kCustom, kCustom},
     .render = render_mistral},
    {.format = F::mistral_v7,
     .name = "mistral-v7",
     .turns = {on("[SYSTEM_PROMPT] ", "[/SYSTEM_PROMPT]"), on("[INST] ", "[/INST]"), on(" ", "</s>")}},
    {.format = F::mistral_v7_tekken,
     .name = "mistral-v7-tekken",
     .turns = {on("[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"), on("[INST]", "[/INST]"), on("", "</s>")}},
    {.format = F::phi3,
     .name = "phi3",
     .turns = {on("<|system|>\n", "<|end|>\n"), on("<|user|>\n", "<|end|>\n"),
               on("<|assistant|>\n", "<|end|>\n")},
     .gen_prompt = "<|assistant|>\n"},
    {.format = F::phi4,
     .name = "phi4",
     .turns = {on("<|im_start|>system<|im_sep|>", "<|im_end|>"),
               on("<|im_start|>user<|im_sep|>", "<|im_end|>"),
               on("<|im_start|>assistant<|im_sep|>", "<|im_end|>")},
     .gen_prompt = "<|im_start|>assistant<|im_sep|>"},
    {.format = F::falcon3,
     .name = "falcon3",
     .turns = {on("<|system|>\n", "\n"), on("<|user|>\n", "\n"), on("<|assistant|>\n", "\n")},
     .gen_prompt = "<|assistant|>\n"},
    {.format = F::zephyr,
     .name = "zephyr",
     .turns = {on("<|system|>\n", "<|endoftext|>\n"), on("<|user|>\n", "<|endoftext|>\n"),
               on("<|assistant|>\n", "<|endoftext|>\n")},
     .gen_prompt = "<|assistant|>\n"},
    {.format = F::monarch,
     .name = "monarch",
     .turns = {kCustom, kCustom, kCustom},
     .gen_prompt = "<s>assistant\n",
     .render = render_monarch},
    {.format = F::gemma,
     .name = "gemma",
     .turns = {kCustom, kCustom, kCustom},
     .gen_prompt = "<start_of_turn>model\n",
     .render = render_gemma},
    {.format = F::orion, .name = "orion", .turns = {kCustom, kCustom, kCustom}, .render = render_orion},
    {.format = F::openchat,
     .name = "openchat",
     .turns = {on("", "<|end_of_turn|>"), on("GPT4 Correct User: ", "<|end_of_turn|>"),
               on("GPT4 Correct Assistant: ", "<|end_of_turn|>")},
     .gen_prompt = "GPT4 Correct Assistant:"},
    {.format = F::vicuna,
     .name = "vicuna",
     .turns = {on("", "\n\n"), on("USER: ", "\n"), on("ASSISTANT: ", "</s>\n")},
     .gen_prompt = "ASSISTANT:"},
    {.format = F::vicuna_orca,
     .name = "vicuna-orca",
     .turns = {on("SYSTEM: ", "\n"), on("USER: ", "\n"), on("ASSISTANT: ", "</s>\n")},
     .gen_prompt = "ASSISTANT:"},
    {.format = F::deepseek,
     .name = "deepseek",
     .turns = {on(""), on("### Instruction:\n", "\n"), on("### Response:\n", "\n<|EOT|>\n")},
     .gen_prompt = "### Response:\n"},
    {.format = F::deepseek2,
     .name = "deepseek2",
     .turns = {on("", "\n\n"), on("User: ", "\n\n"), on("Assistant: ", "<｜end▁of▁sentence｜>")},
     .gen_prompt = "Assistant:"},
    {.format = F::deepseek3,
     .name = "deepseek3",
     .turns = {on("", "\n\n"), on("<｜User｜>"), on("<｜Assistant｜>", "<｜end▁of▁sentence｜>")},
     .gen_prompt = "<｜Assistant｜>"},
    {.format = F::deepseek_ocr, .name = "deepseek-ocr", .turns = {on(""), on(""), on("")}},
    {.format = F::command_r,
     .name = "command-r",
     .turns = {trimmed("<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>"),
               trimmed("<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>"),
               trimmed("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>")},
     .gen_prompt = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {.format = F::llama3,
     .name = "llama3",
     .turns = {trimmed("<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>"),
               trimmed("<|start_header_id|>user<|end_header_id|>\n\n", "<|eot_id|>"),
               trimmed("<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"),
               trimmed("<|start_header_id|>ipython<|end_header_id|>\n\n", "<|eot_id|>"), kNone},
     .gen_prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {.format = F::chatglm3,
     .name = "chatglm3",
     .turns = {on("<|system|>\n "), on("<|user|>\n "), on("<|assistant|>\n ")},
     .gen_prompt = "<|assistant|>",
     .head = "[gMASK]sop"},
    {.format = F::chatglm4,
     .name = "chatglm4",
     .turns = {on("<|system|>\n"), on("<|user|>\n"), on("<|assistant|>\n")},
     .gen_prompt = "<|assistant|>\n",
     .head = "[gMASK]<sop>"},
    {.format = F::glmedge,
     .name = "glmedge",
     .turns = {on("<|system|>\n"), on("<|user|>\n"), on("<|assistant|>\n")},
     .gen_prompt = "<|assistant|>"},
    {.format = F::minicpm, .name = "minicpm", .turns = {trimmed(""), trimmed("<用户>", "<AI>"), trimmed("")}},
    {.format = F::exaone3,
     .name = "exaone3",
     .turns = {trimmed("[|system|]", "[|endofturn|]\n"), trimmed("[|user|]", "\n"),
               trimmed("[|assistant|]", "[|endofturn|]\n")},
     .gen_prompt = "[|assistant|]"},
    {.format = F::exaone4,
     .name = "exaone4",
     .turns = {trimmed("[|system|]", "[|endofturn|]\n"), trimmed("[|user|]", "\n"),
               trimmed("[|assistant|]", "[|endofturn|]\n"), trimmed("[|tool|]", "[|endofturn|]\n"), kNone},
     .gen_prompt = "[|assistant|]"},
    {.format = F::exaone_moe,
     .name = "exaone-moe",
     .turns = {trimmed("<|system|>\n", "<|endofturn|>\n"), trimmed("<|user|>\n", "<|endofturn|>\n"),
               trimmed("<|assistant|>\n", "<|endofturn|>\n"), trimmed("<|tool|>\n", "<|endofturn|>\n"),
               kNone},
     .gen_prompt = "<|assistant|>\n"},
    {.format = F::rwkv_world,
     .name = "rwkv-world",
     .turns = {kCustom, kCustom, kCustom},
     .render = render_rwkv_world},
    {.format = F::granite,
     .name = "granite",
     .turns = {on("<|start_of_role|>system<|end_of_role|>", "<|end_of_text|>\n"),
               on("<|start_of_role|>user<|end_of_role|>", "<|end_of_text|>\n"),
               on("<|start_of_role|>assistant<|end_of_role|>", "<|end_of_text|>\n")},
     .gen_prompt = "<|start_of_role|>assistant<|end_of_role|>"},
    {.format = F::granite_4_0,
     .name = "granite-4.0",
     .turns = {on("<|start_of_role|>system<|end_of_role|>", "<|end_of_text|>\n"),
               on("<|start_of_role|>user<|end_of_role|>", "<|end_of_text|>\n"),
               on("<|start_of_role|>assistant<|end_of_role|>", "<|end_of_text|>\n")},
     .gen_prompt = "<|start_of_role|>assistant<|end_of_role|>"},
    {.format = F::granite_4_1,
     .name = "granite-4.1",
     .turns = {on("<|start_of_role|>system<|end_of_role|>", "<|end_of_text|>\n"),
               on("<|start_of_role|>user<|end_of_role|>", "<|end_of_text|>\n"),
               on("<|start_of_role|>assistant<|end_of_role|>", "<|end_of_text|>\n")},
     .gen_prompt = "<|start_of_role|>assistant<|end_of_role|>"},
    {.format = F::gigachat,
     .name = "gigachat",
     .turns = {on("", "<|message_sep|>"),
               on("user<|role_sep|>", "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>"),
               on("assistant<|role_sep|>", "<|message_sep|>")},
     .gen_prompt = "assistant<|role_sep|>",
     .head = "<s>",
     .system_rule = SystemRule::first_only},
    {.format = F::megrez,
     .name = "megrez",
     .turns = {on("<|role_start|>system<|role_end|>", "<|turn_end|>"),
               on("<|role_start|>user<|role_end|>", "<|turn_end|>"),
               on("<|role_start|>assistant<|role_end|>", "<|turn_end|>")},
     .gen_prompt = "<|role_start|>assistant<|role_end|>"},
    {.format = F::yandex,
     .name = "yandex",
     .turns = {kDropped, on(" Пользователь: ", "\n\n"), on(" Ассистент: ", "\n\n")},
     .gen_prompt = " Ассистент:[SEP]"},
    {.format = F::bailing,
     .name = "bailing",
     .turns = {on("<role>SYSTEM</role>"), on("<role>HUMAN</role>"), on("<role>ASSISTANT</role>")},
     .gen_prompt = "<role>ASSISTANT</role>"},
    {.format = F::bailing_think,
     .name = "bailing-think",
     .turns = {on("<role>SYSTEM</role>"), on("<role>HUMAN</role>"), on("<role>ASSISTANT</role>")},
     .gen_prompt = "<role>ASSISTANT</role><think>"},
    {.format = F::bailing2,
     .name = "bailing2",
     .turns = {on("<role>SYSTEM</role>", "<|role_end|>"), on("<role>HUMAN</role>", "<|role_end|>"),
               on("<role>ASSISTANT</role>", "<|role_end|>")},
     .gen_prompt = "<role>ASSISTANT</role>",
     .head_without_system = "<role>SYSTEM</role>detailed thinking off<|role_end|>"},
    {.format = F::llama4,
     .name = "llama4",
     .turns = {trimmed("<|header_start|>system<|header_end|>\n\n", "<|eot|>"),
               trimmed("<|header_start|>user<|header_end|>\n\n", "<|eot|>"),
               trimmed("<|header_start|>assistant<|header_end|>\n\n", "<|eot|>")},
     .gen_prompt = "<|header_start|>assistant<|header_end|>\n\n"},
    {.format = F::smolvlm,
     .name = "smolvlm",
     .turns = {on("", "\n\n"), on("User: ", "<end_of_utterance>\n"),
               on("Assistant: ", "<end_of_utterance>\n")},
     .gen_prompt = "Assistant:",
     .head = "<|im_start|>"},
    {.format = F::dots1,
     .name = "dots1",
     .turns = {on("<|system|>", "<|endofsystem|>"), on("<|userprompt|>", "<|endofuserprompt|>"),
               on("<|response|>", "<|endofresponse|>")},
     .gen_prompt = "<|response|>"},
    {.format = F::hunyuan_moe,
     .name = "hunyuan-moe",
     .turns = {on("<|startoftext|>", "<|extra_4|>"), on("<|startoftext|>", "<|extra_0|>"),
               on("", "<|eos|>")}},
    {.format = F::gpt_oss,
     .name = "gpt-oss",
     .turns = {on("<|start|>system<|message|>", "<|end|>"), on("<|start|>user<|message|>", "<|end|>"),
               on("<|start|>assistant<|message|>", "<|return|>"), kNone,
               on("<|start|>developer<|message|>", "<|end|>")},
     .gen_prompt = "<|start|>assistant"},
    {.format = F::hunyuan_dense,
     .name = "hunyuan-dense",
     .turns = {on("", "<｜hy_place▁holder▁no▁3｜>"), on("<｜hy_User｜>", "<｜hy_Assistant｜>"),
               on("<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁2｜>")},
     .system_rule = SystemRule::first_only},
    {.format = F::hunyuan_vl,
     .name = "hunyuan-vl",
     .turns = {on("", "<｜hy_place▁holder▁no▁3｜>"), on("", "<｜hy_User｜>"), on("", "<｜hy_Assistant｜>")},
     .head = "<｜hy_begin▁of▁sentence｜>",
     .system_rule = SystemRule::first_only},
    {.format = F::kimi_k2,
     .name = "kimi-k2",
     .turns = {on("<|im_system|>system<|im_middle|>", "<|im_end|>"),
               on("<|im_user|>user<|im_middle|>", "<|im_end|>"),
               on("<|im_assistant|>assistant<|im_middle|>", "<|im_end|>"),
               on("<|im_system|>tool<|im_middle|>", "<|im_end|>"), kNone},
     .gen_prompt = "<|im_assistant|>assistant<|im_middle|>"},
    {.format = F::seed_oss,
     .name = "seed_oss",
     .turns = {on("<seed:bos>system\n", "<seed:eos>"), on("<seed:bos>user\n", "<seed:eos>"),
               trimmed("<seed:bos>assistant\n", "<seed:eos>"), on("<seed:bos>tool\n", "<seed:eos>"), kNone},
     .gen_prompt = "<seed:bos>assistant\n"},
    {.format = F::grok2,
     .name = "grok-2",
     .turns = {trimmed("System: ", "<|separator|>\n\n"), trimmed("Human: ", "<|separator|>\n\n"),
               on("Assistant: ", "<|separator|>\n\n")},
     .gen_prompt = "Assistant:"},
    {.format = F::pangu_embedded,
     .name = "pangu-embedded",
     .turns = {on("[unused9]系统：", "[unused10]"), on("[unused9]用户：", "[unused10]"),
               on("[unused9]助手：", "[unused10]"), on("[unused9]工具：", "[unused10]"), kNone},
     .gen_prompt = "[unused9]助手：",
     .head_without_system = "[unused9]系统：[unused10]"},
    {.format = F::solar_open,
     .name = "solar-open",
     .turns = {on("<|begin|>system<|content|>", "<|end|>"), on("<|begin|>user<|content|>", "<|end|>"),
               on("<|begin|>assistant<|content|>", "<|end|>")},
     .gen_prompt = "<|begin|>assistant"},
    {.format = F::deepseek4,
     .name = "deepseek4",
     .turns = {kCustom, kCustom, kCustom, kCustom, kCustom},
     .render = render_deepseek4,
     .writes_gen_prompt = true},
};

constexpr bool specs_in_enum_order() {
  if (std::size(kSpecs) != static_cast<size_t>(kChatFormatCount)) return false;
  for (size_t i = 0; i < std::size(kSpecs); ++i) {
    if (static_cast<size_t>(kSpecs[i].format) != i) return false;
    // Every format writes the three basic roles (yandex accepts and drops system messages).
    for (int r = kRoleSystem; r <= kRoleAssistant; ++r) {
      if (!kSpecs[i].turns[r].present()) return false;
    }
  }
  return true;
}
static_assert(specs_in_enum_order(), "kSpecs must list every ChatFormat once, in enum order");

}  // namespace

const FormatSpec& format_spec(ChatFormat format) {
  const auto i = static_cast<size_t>(format);
  STRATA_ASSERT(i < std::size(kSpecs));
  return kSpecs[i];
}

int role_index(std::string_view role) {
  for (int r = 0; r < kRoleCount; ++r) {
    if (role == kRoleNames[r]) return r;
  }
  return -1;
}

}  // namespace strata::chat_detail

namespace strata {

const char* chat_format_name(ChatFormat format) {
  return chat_detail::format_spec(format).name;
}

std::vector<std::string_view> chat_format_names() {
  std::vector<std::string_view> names;
  names.reserve(kChatFormatCount);
  for (int i = 0; i < kChatFormatCount; ++i) names.emplace_back(chat_format_name(static_cast<ChatFormat>(i)));
  return names;
}

std::string chat_format_names_joined() {
  std::string s;
  for (std::string_view n : chat_format_names()) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

std::vector<std::string_view> chat_format_roles(ChatFormat format) {
  const chat_detail::FormatSpec& spec = chat_detail::format_spec(format);
  std::vector<std::string_view> roles;
  for (int r = 0; r < chat_detail::kRoleCount; ++r) {
    if (spec.turns[r].present()) roles.emplace_back(chat_detail::kRoleNames[r]);
  }
  return roles;
}

}  // namespace strata
