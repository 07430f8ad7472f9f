// chat_format_detect / by_name / choose / for_model: which built-in format a Jinja template is
// (by the distinguishing fragments of the models' published templates, written here by hand),
// names, the server's choice with its chatml fallback, and the fixture models' templates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include "common/fixtures.h"
#include "text/text_test_util.h"
#include "format/gguf.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace strata {
namespace {

using testing::MemGguf;

std::string detected(std::string_view tmpl) {
  auto f = chat_format_detect(tmpl);
  return f.ok() ? chat_format_name(*f) : "error: " + f.message();
}

// Fragments in the shape of the models' own chat templates (Jinja source text: '\n' inside a
// Jinja string literal is a backslash and an n).
TEST(ChatDetect, PublishedTemplateFragments) {
  const struct {
    const char* tmpl;
    const char* want;
  } cases[] = {
      // Qwen2.5 / Qwen3 / ChatML
      {R"({%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endfor %})",
       "chatml"},
      // Phi-4 writes ChatML markers with <|im_sep|>
      {R"({{'<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + '<|im_end|>'}})", "phi4"},
      // SmolVLM uses <|im_start|> only as its BOS
      {R"(<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}: {{ message['content'] }}<end_of_utterance>)",
       "smolvlm"},
      // Llama 3 / 3.1
      {R"({% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' %})",
       "llama3"},
      // Llama 2 chat (system in <<SYS>>, content stripped)
      {R"({{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' %})",
       "llama2-sys-strip"},
      {R"({% if message['role'] == 'system' %}{{ '[INST] <<SYS>>\n' + message['content'] + '\n<</SYS>>\n\n' }}{% endif %})",
       "llama2-sys"},
      {R"({% if loop.index0 > 1 %}{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}<<SYS>>)",
       "llama2-sys-bos"},
      {R"({{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endfor %})",
       "llama2"},
      // Mistral's tokenizer templates
      {R"({{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + message['content'] + '[/INST]' }})",
       "mistral-v7"},
      {R"({{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }})", "mistral-v1"},
      {R"({{- '[AVAILABLE_TOOLS]' + tools|tojson + '[/AVAILABLE_TOOLS]' }}{{- ' [INST] ' + message['content'] + ' [/INST]' }})",
       "mistral-v1"},
      {R"({{- "[AVAILABLE_TOOLS]" + tools|tojson + "[/AVAILABLE_TOOLS]" }}{{- "[INST]" + message["content"] + "[/INST]" }})",
       "mistral-v3-tekken"},
      {R"({{- '[AVAILABLE_TOOLS]' + tools|tojson + '[/AVAILABLE_TOOLS]' }}{{- '[INST]' + message['content'] + '[/INST]' }})",
       "mistral-v3"},
      // Gemma
      {R"({{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }})", "gemma"},
      // Phi-3
      {R"({{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}})", "phi3"},
      // Zephyr
      {R"({{ '<|user|>\n' + message['content'] + eos_token }}{# eos_token is <|endoftext|> #})", "zephyr"},
      // DeepSeek-V3 / R1
      {R"({{'<｜User｜>' + message['content']}}{{'<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>'}})",
       "deepseek3"},
      // DeepSeek-V2
      {R"({{ 'User: ' + message['content'] + '\n\n' }}{{ 'Assistant: ' + message['content'] + eos_token }})",
       "deepseek2"},
      // DeepSeek Coder
      {R"({{'### Instruction:\n' + message['content'] + '\n'}}{{'### Response:\n' + message['content'] + '\n<|EOT|>\n'}})",
       "deepseek"},
      // gpt-oss (harmony)
      {R"({{- "<|start|>assistant<|channel|>final<|message|>" + message.content + "<|end|>" }})", "gpt-oss"},
      // Command R
      {R"({{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }})",
       "command-r"},
      // Vicuna and Orca-Vicuna
      {R"({{'USER: ' + message['content'] + '\n'}}{{'ASSISTANT: ' + message['content'] + '</s>\n'}})",
       "vicuna"},
      {R"({{'SYSTEM: ' + message['content'] + '\n'}}{{'USER: ' + message['content'] + '\n'}}{{'ASSISTANT: '}})",
       "vicuna-orca"},
      // OpenChat 3.5
      {R"({{ 'GPT4 Correct ' + message['role'].title() + ': ' + message['content'] + '<|end_of_turn|>'}})",
       "openchat"},
      // Llama 4
      {R"({{- '<|header_start|>' + message['role'] + '<|header_end|>\n\n' }})", "llama4"},
      // Granite 3.x
      {R"({{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }})",
       "granite"},
      // EXAONE 3
      {R"({{ '[|system|]' + message['content'] + '[|endofturn|]\n' }}{{ '[|assistant|]' + message['content'] }})",
       "exaone3"},
      // Kimi K2
      {R"({{'<|im_assistant|>assistant<|im_middle|>'}}{{ message['content'] }})", "kimi-k2"},
      // GLM-4
      {R"([gMASK]<sop>{% for item in messages %}<|{{ item['role'] }}|>{{ item['content'] }}{% endfor %})",
       "chatglm4"},
      // Hunyuan-A13B
      {R"({{ '<|startoftext|>' + message['content'] + '<|extra_0|>' }}{{ '<|startoftext|>' + system + '<|extra_4|>' }})",
       "hunyuan-moe"},
  };
  for (const auto& c : cases) EXPECT_EQ(detected(c.tmpl), c.want) << c.tmpl;
}

// The rules are tried in llama.cpp's order: the first family whose markers occur wins.
TEST(ChatDetect, OrderOfRules) {
  EXPECT_EQ(detected("<|im_start|> ... <|start_header_id|><|end_header_id|>"), "chatml");
  EXPECT_EQ(detected("<|im_start|>[INST]"), "chatml");
  EXPECT_EQ(detected("[INST] <start_of_turn>"), "llama2");
  EXPECT_EQ(detected("mistral: a template that names itself first"), "llama2");
  EXPECT_EQ(detected("<|user|><|assistant|><|end|><|endoftext|>"), "phi3");
  EXPECT_EQ(detected("<|user|><|assistant|></s>"), "falcon3");
  EXPECT_EQ(detected("<|user|><|assistant|>"), "glmedge");
  EXPECT_EQ(detected("<|user|><|assistant|><|tool_declare|>"), "exaone-moe");
  EXPECT_EQ(detected("[|system|][|assistant|][|endofturn|][|tool|]"), "exaone4");
  EXPECT_EQ(detected("<|start_of_role|><tools>g4_default_system_message"), "granite-4.0");
  EXPECT_EQ(detected("<|start_of_role|><tool_call>"), "granite-4.1");
}

TEST(ChatDetect, BuiltinNamesAreTemplatesToo) {
  for (std::string_view n : chat_format_names()) EXPECT_EQ(detected(n), n);
  EXPECT_EQ(detected("qwen"), "chatml");
}

TEST(ChatDetect, UnknownTemplateQuotesItsStart) {
  const std::string tmpl =
      "{% for m in messages %}\n{{ m.role | upper }}: {{ m.content }}\n{% endfor %}"
      "{{ 'padding that goes past the sixty characters of the quote' }}";
  auto f = chat_format_detect(tmpl);
  ASSERT_FALSE(f.ok());
  const std::string& msg = f.message();
  EXPECT_NE(
      msg.find("unsupported chat template \"{% for m in messages %}\\n{{ m.role | upper }}: {{ m.content"),
      std::string::npos)
      << msg;
  EXPECT_NE(msg.find("\"..."), std::string::npos) << msg;
  EXPECT_EQ(msg.find("padding"), std::string::npos) << msg;
  EXPECT_NE(msg.find("chatml, llama2, llama2-sys"), std::string::npos) << msg;
  EXPECT_FALSE(chat_format_detect("").ok());
}

TEST(ChatDetect, ByName) {
  EXPECT_EQ(chat_format_by_name("llama3").value(), ChatFormat::llama3);
  EXPECT_EQ(chat_format_by_name("gpt-oss").value(), ChatFormat::gpt_oss);
  EXPECT_EQ(chat_format_by_name("qwen").value(), ChatFormat::chatml);
  auto bad = chat_format_by_name("llama-3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("unknown chat format \"llama-3\""), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("mistral-v7, "), std::string::npos) << bad.message();
  // A Jinja template is not a name.
  EXPECT_FALSE(chat_format_by_name("{{ '<|im_start|>' }}").ok());
}

TEST(ChatDetect, NamesAreUniqueAndRoundTrip) {
  const auto names = chat_format_names();
  ASSERT_EQ(names.size(), static_cast<size_t>(kChatFormatCount));
  EXPECT_EQ(std::set<std::string_view>(names.begin(), names.end()).size(), names.size());
  for (int i = 0; i < kChatFormatCount; ++i) {
    const auto f = static_cast<ChatFormat>(i);
    EXPECT_EQ(chat_format_by_name(chat_format_name(f)).value(), f);
  }
  for (const char* required : {"chatml", "llama2", "llama2-sys", "llama3", "mistral-v1", "mistral-v3",
                               "mistral-v7", "phi3", "gemma", "zephyr", "deepseek", "deepseek2", "deepseek3",
                               "command-r", "vicuna", "openchat", "granite", "gpt-oss"}) {
    EXPECT_TRUE(chat_format_by_name(required).ok()) << required;
  }
  EXPECT_EQ(chat_format_names_joined().substr(0, 22), "chatml, llama2, llama2");
}

TEST(ChatChoose, OverrideModelTemplateAndFallback) {
  const std::string gemma_tmpl = "{{ '<start_of_turn>' + role + '\\n' }}";
  auto c = chat_format_choose(gemma_tmpl, "");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->format, ChatFormat::gemma);
  EXPECT_EQ(c->source, ChatFormatSource::model_template);

  c = chat_format_choose(gemma_tmpl, "llama3");  // a name wins over the model's template
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->format, ChatFormat::llama3);
  EXPECT_EQ(c->source, ChatFormatSource::override_arg);

  c = chat_format_choose(std::nullopt, "{{ '<|start|>' }}{{ '<|channel|>' }}");  // or a template to detect
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->format, ChatFormat::gpt_oss);

  for (std::optional<std::string_view> none :
       {std::optional<std::string_view>(), std::optional<std::string_view>("")}) {
    c = chat_format_choose(none, "");
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->format, ChatFormat::chatml);
    EXPECT_EQ(c->source, ChatFormatSource::default_chatml);
    EXPECT_STREQ(chat_format_source_name(c->source), "default (model has no template)");
  }

  auto bad_override = chat_format_choose(gemma_tmpl, "nonsense");
  ASSERT_FALSE(bad_override.ok());
  EXPECT_EQ(bad_override.message().rfind("--chat-template: unsupported chat template \"nonsense\"", 0), 0u)
      << bad_override.message();

  auto bad_model = chat_format_choose("{{ messages }}", "");
  ASSERT_FALSE(bad_model.ok());
  EXPECT_EQ(bad_model.message().rfind("tokenizer.chat_template: unsupported chat template", 0), 0u)
      << bad_model.message();
  EXPECT_NE(bad_model.message().find("pass --chat-template NAME"), std::string::npos) << bad_model.message();
}

MemGguf gguf_with(const std::function<void(GgufWriter&)>& fill) {
  return testing::mem_gguf(fill, "chat.gguf");
}

TEST(ChatChoose, FromGgufMetadata) {
  MemGguf with = gguf_with([](GgufWriter& w) {
    w.set_string("tokenizer.chat_template", "{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}");
  });
  ASSERT_TRUE(with.file);
  auto c = chat_format_for_model(*with.file);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->format, ChatFormat::llama3);
  EXPECT_EQ(c->source, ChatFormatSource::model_template);

  MemGguf without = gguf_with([](GgufWriter&) {});
  ASSERT_TRUE(without.file);
  c = chat_format_for_model(*without.file);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->format, ChatFormat::chatml);
  EXPECT_EQ(c->source, ChatFormatSource::default_chatml);
  c = chat_format_for_model(*without.file, "deepseek3");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->format, ChatFormat::deepseek3);

  MemGguf unknown =
      gguf_with([](GgufWriter& w) { w.set_string("tokenizer.chat_template", "{{ messages }}"); });
  ASSERT_TRUE(unknown.file);
  c = chat_format_for_model(*unknown.file);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message().rfind(
                "chat.gguf: tokenizer.chat_template: unsupported chat template \"{{ messages }}\"", 0),
            0u)
      << c.message();
  EXPECT_TRUE(chat_format_for_model(*unknown.file, "chatml").ok());  // the way out the error names

  MemGguf wrong_type = gguf_with([](GgufWriter& w) { w.set_u32("tokenizer.chat_template", 7); });
  ASSERT_TRUE(wrong_type.file);
  c = chat_format_for_model(*wrong_type.file);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("chat.gguf"), std::string::npos) << c.message();
  EXPECT_NE(c.message().find("tokenizer.chat_template"), std::string::npos) << c.message();
}

// The llama.cpp fixture models carry a ChatML template; the prompt it gives must tokenize with
// one control token per <|im_start|> where the vocab has it.
TEST(ChatChoose, FixtureModelsAreChatml) {
  STRATA_REQUIRE_FIXTURES(dir);
  const std::vector<ChatMessage> conv = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
  int models = 0, tokenized = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/models")) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().string());
    auto file = GgufFile::open(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.message();
    ASSERT_NE((*file)->find(kChatTemplateKey), nullptr);
    auto c = chat_format_for_model(**file);
    ASSERT_TRUE(c.ok()) << c.message();
    EXPECT_EQ(c->format, ChatFormat::chatml);
    EXPECT_EQ(c->source, ChatFormatSource::model_template);
    ++models;

    auto tok = Tokenizer::from_gguf(**file);
    ASSERT_TRUE(tok.ok()) << tok.message();
    const int32_t im_start = (*tok)->find_token("<|im_start|>");
    if (im_start < 0) continue;
    auto prompt = chat_apply(c->format, conv, true);
    ASSERT_TRUE(prompt.ok());
    const std::vector<int32_t> ids = (*tok)->encode(*prompt, true, true);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), im_start), 5);  // 4 messages + the assistant prompt
    const int32_t im_end = (*tok)->find_token("<|im_end|>");
    if (im_end >= 0) {
      EXPECT_EQ(std::count(ids.begin(), ids.end(), im_end), 4);
    }
    ++tokenized;
  }
  EXPECT_GE(models, 1);
  std::printf("[ chat     ] %d fixture models: chatml; %d prompts tokenized\n", models, tokenized);
}

}  // namespace
}  // namespace strata
