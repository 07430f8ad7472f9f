// The DeepSeek-V4 chat format (deepseek4): exact prompts for system / user / assistant / tool
// turns, thinking on and off, merged user runs and system messages anywhere, as llama.cpp's
// models/templates/deepseek-ai-DeepSeek-V4.jinja renders them (expected strings written by hand
// from the template); detection of that template and the architecture default; and the token ids
// of a rendered prompt through a tokenizer.json carrying DeepSeek's special tokens (BOS from
// tokenizer_config.json).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace strata {
namespace {

using Msgs = std::vector<ChatMessage>;

std::string apply(const Msgs& msgs, bool add, bool thinking = false) {
  auto r =
      chat_apply(ChatFormat::deepseek4, msgs, ChatOptions{.add_assistant_prompt = add, .thinking = thinking});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
  return r.ok() ? *r : std::string();
}

const Msgs kConv = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there", "The user greets."},
    {"user", "Who are you"},
};

TEST(ChatTemplateDeepseek4, ConversationThinkingOff) {
  const std::string body =
      "You are a helpful assistant<｜User｜>Hello<｜Assistant｜></think>Hi there<｜end▁of▁sentence｜>"
      "<｜User｜>Who are you";
  EXPECT_EQ(apply(kConv, false), body);
  EXPECT_EQ(apply(kConv, true), body + "<｜Assistant｜></think>");  // a bare </think>, as V4's template
  EXPECT_EQ(chat_format_name(ChatFormat::deepseek4), std::string("deepseek4"));
  EXPECT_EQ(chat_format_by_name("deepseek4").value(), ChatFormat::deepseek4);
}

TEST(ChatTemplateDeepseek4, ThinkingOpensTheReplyAndKeepsOnlyTheLastReasoning) {
  // Reasoning of an assistant turn before the last user turn is dropped (lone </think>).
  EXPECT_EQ(apply(kConv, true, true),
            "You are a helpful assistant<｜User｜>Hello<｜Assistant｜></think>Hi there<｜end▁of▁sentence｜>"
            "<｜User｜>Who are you<｜Assistant｜><think>");
  // After the last user turn it is written inside <think>...</think>.
  const Msgs tail = {{"user", "2+2?"}, {"assistant", "4", "Add them."}};
  EXPECT_EQ(apply(tail, false, true),
            "<｜User｜>2+2?<｜Assistant｜><think>Add them.</think>4<｜end▁of▁sentence｜>");
  EXPECT_EQ(apply(tail, false, false), "<｜User｜>2+2?<｜Assistant｜></think>4<｜end▁of▁sentence｜>");
  // No user turn at all: every assistant turn counts as after it.
  EXPECT_EQ(apply({{"assistant", "a", "r"}}, false, true),
            "<｜Assistant｜><think>r</think>a<｜end▁of▁sentence｜>");
}

TEST(ChatTemplateDeepseek4, MaximumReasoningEffortPreamble) {
  const Msgs conv = {{"system", "S"}, {"user", "Q"}};
  const ChatOptions max{.thinking = true, .reasoning_max = true};
  auto r = chat_apply(ChatFormat::deepseek4, conv, max);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->rfind("Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST", 0), 0u)
      << *r;
  EXPECT_NE(r->find("is left unchecked.\n\nS<｜User｜>Q<｜Assistant｜><think>"), std::string::npos) << *r;
  // Only with thinking on.
  EXPECT_EQ(chat_apply(ChatFormat::deepseek4, conv, ChatOptions{.reasoning_max = true}).value(),
            "S<｜User｜>Q<｜Assistant｜></think>");
}

TEST(ChatTemplateDeepseek4, SystemMessagesGoFirstAndUserRunsMerge) {
  const Msgs conv = {{"user", "a"},      {"system", "S1"}, {"developer", "b"}, {"tool", "{\"t\": 21}"},
                     {"assistant", "c"}, {"system", ""},   {"system", "S3"},   {"user", "d"}};
  EXPECT_EQ(apply(conv, true),
            "S1\n\n\n\nS3<｜User｜>a\n\nb\n\n<tool_result>{\"t\": 21}</tool_result><｜Assistant｜></think>c"
            "<｜end▁of▁sentence｜><｜User｜>d<｜Assistant｜></think>");
  EXPECT_EQ(apply({{"system", ""}, {"user", "x"}}, false), "<｜User｜>x");
}

TEST(ChatTemplateDeepseek4, DetectedFromTheV4TemplateAndTheArchitecture) {
  // Characteristic lines of deepseek-ai-DeepSeek-V4.jinja (V3's markers plus the DSML token).
  const std::string v4 =
      "{%- set dsml_token = '｜DSML｜' -%}{{- '<｜User｜>' -}}{{- '<｜Assistant｜>' -}}"
      "{{- '<｜end▁of▁sentence｜>' -}}";
  EXPECT_EQ(chat_format_detect(v4).value(), ChatFormat::deepseek4);
  const std::string v3 =
      "{{'<｜User｜>' + message['content']}}{{'<｜Assistant｜>'}}{{'<｜end▁of▁sentence｜>'}}";
  EXPECT_EQ(chat_format_detect(v3).value(), ChatFormat::deepseek3);
  auto c = chat_format_choose(std::nullopt, "", "deepseek4");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->format, ChatFormat::deepseek4);
  EXPECT_EQ(c->source, ChatFormatSource::arch_default);
  EXPECT_EQ(chat_format_choose(std::nullopt, "", "deepseek_v41")->format, ChatFormat::deepseek4);
  EXPECT_EQ(chat_format_choose(std::nullopt, "", "qwen3moe")->format, ChatFormat::chatml);
  EXPECT_EQ(chat_format_choose(v3, "", "deepseek4")->format, ChatFormat::deepseek3);  // the model's own wins
  EXPECT_EQ(chat_format_choose(std::nullopt, "chatml", "deepseek4")->format, ChatFormat::chatml);
}

TEST(ChatTemplateDeepseek4, DefaultForADeepseek4GgufWithoutTemplate) {
  for (const char* arch : {"deepseek4", "qwen3moe"}) {
    GgufWriter w;
    w.set_string("general.architecture", arch);
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(w.write_to_memory(&bytes).ok());
    auto f = GgufFile::from_memory(bytes.data(), bytes.size(), "ds4.gguf");
    ASSERT_TRUE(f.ok()) << f.message();
    auto c = chat_format_for_model(**f);
    ASSERT_TRUE(c.ok()) << c.message();
    EXPECT_EQ(c->format, std::string(arch) == "deepseek4" ? ChatFormat::deepseek4 : ChatFormat::chatml)
        << arch;
  }
}

// A byte-level BPE tokenizer.json with DeepSeek's control tokens (ids 0..5) and a few letters.
const char* kTokJson = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 0, "content": "<｜begin▁of▁sentence｜>", "special": true},
    {"id": 1, "content": "<｜end▁of▁sentence｜>", "special": true},
    {"id": 2, "content": "<｜User｜>", "special": false},
    {"id": 3, "content": "<｜Assistant｜>", "special": false},
    {"id": 4, "content": "<think>", "special": false},
    {"id": 5, "content": "</think>", "special": false}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": null,
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false, "fuse_unk": false,
    "vocab": {"<｜begin▁of▁sentence｜>": 0, "<｜end▁of▁sentence｜>": 1, "<｜User｜>": 2, "<｜Assistant｜>": 3,
      "<think>": 4, "</think>": 5, "H": 6, "i": 7, "S": 8, "Hi": 9, "o": 10, "Y": 11, "Yo": 12},
    "merges": ["H i", "Y o"]}
})";
const char* kTokConfig =
    R"({"add_bos_token": true, "add_eos_token": false, "bos_token": "<｜begin▁of▁sentence｜>",
        "eos_token": "<｜end▁of▁sentence｜>"})";

TEST(ChatTemplateDeepseek4, PromptIds) {
  auto tok = Tokenizer::from_json(kTokJson, kTokConfig, "ds/tokenizer.json", "ds/tokenizer_config.json");
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::string text =
      apply({{"system", "S"}, {"user", "Hi"}, {"assistant", "Yo"}, {"user", "Hi"}}, true);
  // BOS from tokenizer_config.json, then S <User> Hi <Assistant> </think> Yo <eos> <User> Hi <Assistant>
  // </think>
  EXPECT_EQ((*tok)->encode(text, /*add_special=*/true, /*parse_special=*/true),
            (std::vector<int32_t>{0, 8, 2, 9, 3, 5, 12, 1, 2, 9, 3, 5}));
}

TEST(ChatTemplateDeepseek4, ChosenForACheckpointDirectory) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "strata_ds4_chat_dir";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name) << text; };
  auto c = chat_format_for_dir(dir.string(), "deepseek_v41");  // no tokenizer_config.json
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->format, ChatFormat::deepseek4);
  write("tokenizer_config.json", kTokConfig);  // no chat_template key
  EXPECT_EQ(chat_format_for_dir(dir.string(), "deepseek_v41")->source, ChatFormatSource::arch_default);
  write("tokenizer_config.json", R"({"chat_template": "{{ '<|im_start|>' }}"})");
  c = chat_format_for_dir(dir.string(), "deepseek_v41");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->format, ChatFormat::chatml);
  EXPECT_EQ(c->source, ChatFormatSource::model_template);
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "default", "template": "<｜User｜><｜Assistant｜>｜DSML｜"}]})");
  EXPECT_EQ(chat_format_for_dir(dir.string(), "llama")->format, ChatFormat::deepseek4);
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": 5}, 3, {"name": "tool_use", "template": "x"}]})");
  c = chat_format_for_dir(dir.string(), "deepseek_v41");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("without a \"default\""), std::string::npos) << c.message();
  write("tokenizer_config.json", R"({"chat_template": 7})");
  c = chat_format_for_dir(dir.string(), "deepseek_v41");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("tokenizer_config.json: chat_template"), std::string::npos) << c.message();
  write("tokenizer_config.json", R"({"chat_template": "{{ nonsense }}"})");
  c = chat_format_for_dir(dir.string(), "deepseek_v41");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("tokenizer_config.json"), std::string::npos) << c.message();
  EXPECT_EQ(chat_format_for_dir(dir.string(), "deepseek_v41", "deepseek4")->format, ChatFormat::deepseek4);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata
