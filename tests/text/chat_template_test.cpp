// chat_apply per built-in format: the exact prompt for one system + user + assistant + user
// conversation, without and with the assistant prompt. Expectations are written by hand from the
// formats the model cards document, as llama.cpp's built-in templates (de3ff81) write them; the
// assistant reply carries two spaces on each side so formats that trim show it.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "text/chat_template.h"

namespace strata {
namespace {

const std::vector<ChatMessage> kConv = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "  Hi there  "},
    {"user", "Who are you"},
};

struct Case {
  const char* name;
  const char* prompt;      // add_assistant_prompt = false
  const char* gen_prompt;  // what add_assistant_prompt = true appends
};

const Case kCases[] = {
    {"chatml",
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\n  Hi there  <|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n",
     "<|im_start|>assistant\n"},
    {"llama2", "[INST] You are a helpful assistant\nHello [/INST]  Hi there  </s>[INST] Who are you [/INST]",
     ""},
    {"llama2-sys",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]  Hi there  </s>[INST] Who are "
     "you [/INST]",
     ""},
    {"llama2-sys-bos",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]  Hi there  </s><s>[INST] Who "
     "are you "
     "[/INST]",
     ""},
    {"llama2-sys-strip",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you "
     "[/INST]",
     ""},
    {"mistral-v1",
     " [INST] You are a helpful assistant\n\nHello [/INST]   Hi there  </s> [INST] Who are you [/INST]", ""},
    {"mistral-v3", "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST]",
     ""},
    {"mistral-v3-tekken",
     "[INST]You are a helpful assistant\n\nHello[/INST]  Hi there  </s>[INST]Who are you[/INST]", ""},
    {"mistral-v7",
     "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST]   Hi there  </s>[INST] "
     "Who are "
     "you[/INST]",
     ""},
    {"mistral-v7-tekken",
     "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]  Hi there  </s>[INST]Who "
     "are "
     "you[/INST]",
     ""},
    {"phi3",
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\n  Hi there  "
     "<|end|>\n"
     "<|user|>\nWho are you<|end|>\n",
     "<|assistant|>\n"},
    {"phi4",
     "<|im_start|>system<|im_sep|>You are a helpful "
     "assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|>"
     "<|im_start|>assistant<|im_sep|>  Hi there  <|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|>",
     "<|im_start|>assistant<|im_sep|>"},
    {"falcon3",
     "<|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\n  Hi there  \n<|user|>\nWho "
     "are you\n",
     "<|assistant|>\n"},
    {"zephyr",
     "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\n  "
     "Hi there  "
     "<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n",
     "<|assistant|>\n"},
    {"monarch",
     "system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\n  Hi there  "
     "</s>\n<s>user\nWho are "
     "you</s>\n",
     "<s>assistant\n"},
    {"gemma",
     "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
     "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n",
     "<start_of_turn>model\n"},
    {"orion",
     "Human: You are a helpful assistant\n\nHello\n\nAssistant: </s>  Hi there  </s>Human: Who are "
     "you\n\nAssistant: "
     "</s>",
     ""},
    {"openchat",
     "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>GPT4 Correct "
     "Assistant:   Hi "
     "there  <|end_of_turn|>GPT4 Correct User: Who are you<|end_of_turn|>",
     "GPT4 Correct Assistant:"},
    {"vicuna", "You are a helpful assistant\n\nUSER: Hello\nASSISTANT:   Hi there  </s>\nUSER: Who are you\n",
     "ASSISTANT:"},
    {"vicuna-orca",
     "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT:   Hi there  </s>\nUSER: Who are you\n",
     "ASSISTANT:"},
    {"deepseek",
     "You are a helpful assistant### Instruction:\nHello\n### Response:\n  Hi there  \n<|EOT|>\n### "
     "Instruction:\nWho "
     "are you\n",
     "### Response:\n"},
    {"deepseek2",
     "You are a helpful assistant\n\nUser: Hello\n\nAssistant:   Hi there  <｜end▁of▁sentence｜>User: Who "
     "are you\n\n",
     "Assistant:"},
    {"deepseek3",
     "You are a helpful assistant\n\n<｜User｜>Hello<｜Assistant｜>  Hi there  "
     "<｜end▁of▁sentence｜><｜User｜>Who are you",
     "<｜Assistant｜>"},
    {"deepseek-ocr", "You are a helpful assistantHello  Hi there  Who are you", ""},
    {"command-r",
     "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful "
     "assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|>"
     "<|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi "
     "there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|>",
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {"llama3",
     "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
     "assistant<|eot_id|><|start_header_id|>user"
     "<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi "
     "there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>",
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"chatglm3",
     "[gMASK]sop<|system|>\n You are a helpful assistant<|user|>\n Hello<|assistant|>\n   Hi there  "
     "<|user|>\n Who "
     "are you",
     "<|assistant|>"},
    {"chatglm4",
     "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\n  Hi there  "
     "<|user|>\nWho are "
     "you",
     "<|assistant|>\n"},
    {"glmedge",
     "<|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\n  Hi there  <|user|>\nWho are you",
     "<|assistant|>"},
    {"minicpm", "You are a helpful assistant<用户>Hello<AI>Hi there<用户>Who are you<AI>", ""},
    {"exaone3",
     "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n"
     "[|user|]Who are you\n",
     "[|assistant|]"},
    {"exaone4",
     "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n"
     "[|user|]Who are you\n",
     "[|assistant|]"},
    {"exaone-moe",
     "<|system|>\nYou are a helpful assistant<|endofturn|>\n<|user|>\nHello<|endofturn|>\n<|assistant|>\nHi "
     "there<|endofturn|>\n<|user|>\nWho are you<|endofturn|>\n",
     "<|assistant|>\n"},
    {"rwkv-world",
     "System: You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there\n\nUser: Who are "
     "you\n\nAssistant:",
     ""},
    {"granite",
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user"
     "<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>  Hi there  "
     "<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n",
     "<|start_of_role|>assistant<|end_of_role|>"},
    {"granite-4.0",
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user"
     "<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>  Hi there  "
     "<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n",
     "<|start_of_role|>assistant<|end_of_role|>"},
    {"granite-4.1",
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user"
     "<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>  Hi there  "
     "<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n",
     "<|start_of_role|>assistant<|end_of_role|>"},
    {"gigachat",
     "<s>You are a helpful assistant<|message_sep|>user<|role_sep|>Hello<|message_sep|>available "
     "functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>  Hi there  "
     "<|message_sep|>user<|role_sep|>Who are "
     "you<|message_sep|>available functions<|role_sep|>[]<|message_sep|>",
     "assistant<|role_sep|>"},
    {"megrez",
     "<|role_start|>system<|role_end|>You are a helpful "
     "assistant<|turn_end|><|role_start|>user<|role_end|>Hello"
     "<|turn_end|><|role_start|>assistant<|role_end|>  Hi there  "
     "<|turn_end|><|role_start|>user<|role_end|>Who are "
     "you<|turn_end|>",
     "<|role_start|>assistant<|role_end|>"},
    // YandexGPT's own template has no place for a system message: it is accepted and dropped.
    {"yandex", " Пользователь: Hello\n\n Ассистент:   Hi there  \n\n Пользователь: Who are you\n\n",
     " Ассистент:[SEP]"},
    {"bailing",
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>  Hi there  "
     "<role>HUMAN</role>Who are you",
     "<role>ASSISTANT</role>"},
    {"bailing-think",
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>  Hi there  "
     "<role>HUMAN</role>Who are you",
     "<role>ASSISTANT</role><think>"},
    {"bailing2",
     "<role>SYSTEM</role>You are a helpful "
     "assistant<|role_end|><role>HUMAN</role>Hello<|role_end|><role>ASSISTANT"
     "</role>  Hi there  <|role_end|><role>HUMAN</role>Who are you<|role_end|>",
     "<role>ASSISTANT</role>"},
    {"llama4",
     "<|header_start|>system<|header_end|>\n\nYou are a helpful "
     "assistant<|eot|><|header_start|>user<|header_end|>"
     "\n\nHello<|eot|><|header_start|>assistant<|header_end|>\n\nHi "
     "there<|eot|><|header_start|>user<|header_end|>\n\n"
     "Who are you<|eot|>",
     "<|header_start|>assistant<|header_end|>\n\n"},
    {"smolvlm",
     "<|im_start|>You are a helpful assistant\n\nUser: Hello<end_of_utterance>\nAssistant:   Hi there  "
     "<end_of_utterance>\nUser: Who are you<end_of_utterance>\n",
     "Assistant:"},
    {"dots1",
     "<|system|>You are a helpful assistant<|endofsystem|><|userprompt|>Hello<|endofuserprompt|><|response|> "
     " Hi "
     "there  <|endofresponse|><|userprompt|>Who are you<|endofuserprompt|>",
     "<|response|>"},
    {"hunyuan-moe",
     "<|startoftext|>You are a helpful assistant<|extra_4|><|startoftext|>Hello<|extra_0|>  Hi there  "
     "<|eos|><|startoftext|>Who are you<|extra_0|>",
     ""},
    {"gpt-oss",
     "<|start|>system<|message|>You are a helpful "
     "assistant<|end|><|start|>user<|message|>Hello<|end|><|start|>"
     "assistant<|message|>  Hi there  <|return|><|start|>user<|message|>Who are you<|end|>",
     "<|start|>assistant"},
    {"hunyuan-dense",
     "You are a helpful "
     "assistant<｜hy_place▁holder▁no▁3｜><｜hy_User｜>Hello<｜hy_Assistant｜><｜hy_Assistant｜>  Hi "
     "there  <｜hy_place▁holder▁no▁2｜><｜hy_User｜>Who are you<｜hy_Assistant｜>",
     ""},
    {"hunyuan-vl",
     "<｜hy_begin▁of▁sentence｜>You are a helpful assistant<｜hy_place▁holder▁no▁3｜>Hello<｜hy_User｜>  Hi "
     "there  "
     "<｜hy_Assistant｜>Who are you<｜hy_User｜>",
     ""},
    {"kimi-k2",
     "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|><|im_user|>user<|im_middle|>Hello"
     "<|im_end|><|im_assistant|>assistant<|im_middle|>  Hi there  <|im_end|><|im_user|>user<|im_middle|>Who "
     "are "
     "you<|im_end|>",
     "<|im_assistant|>assistant<|im_middle|>"},
    {"seed_oss",
     "<seed:bos>system\nYou are a helpful "
     "assistant<seed:eos><seed:bos>user\nHello<seed:eos><seed:bos>assistant\nHi "
     "there<seed:eos><seed:bos>user\nWho are you<seed:eos>",
     "<seed:bos>assistant\n"},
    {"grok-2",
     "System: You are a helpful assistant<|separator|>\n\nHuman: Hello<|separator|>\n\nAssistant:   Hi there "
     " "
     "<|separator|>\n\nHuman: Who are you<|separator|>\n\n",
     "Assistant:"},
    {"pangu-embedded",
     "[unused9]系统：You are a helpful assistant[unused10][unused9]用户：Hello[unused10][unused9]助手：  Hi "
     "there  "
     "[unused10][unused9]用户：Who are you[unused10]",
     "[unused9]助手："},
    {"solar-open",
     "<|begin|>system<|content|>You are a helpful "
     "assistant<|end|><|begin|>user<|content|>Hello<|end|><|begin|>"
     "assistant<|content|>  Hi there  <|end|><|begin|>user<|content|>Who are you<|end|>",
     "<|begin|>assistant"},
    {"deepseek4",
     "You are a helpful assistant<｜User｜>Hello<｜Assistant｜></think>  Hi there  "
     "<｜end▁of▁sentence｜><｜User｜>Who "
     "are you",
     "<｜Assistant｜></think>"},
};

std::string apply(ChatFormat f, const std::vector<ChatMessage>& msgs, bool add) {
  auto r = chat_apply(f, msgs, add);
  EXPECT_TRUE(r.ok()) << chat_format_name(f) << ": " << (r.ok() ? "" : r.message());
  return r.ok() ? *r : std::string();
}

std::string apply(const char* name, const std::vector<ChatMessage>& msgs, bool add) {
  auto f = chat_format_by_name(name);
  EXPECT_TRUE(f.ok()) << name;
  return f.ok() ? apply(*f, msgs, add) : std::string();
}

TEST(ChatTemplate, EveryFormatHasAnExpectedConversation) {
  std::set<std::string> covered;
  for (const Case& c : kCases) covered.insert(c.name);
  for (std::string_view n : chat_format_names()) EXPECT_TRUE(covered.count(std::string(n))) << n;
  EXPECT_EQ(covered.size(), static_cast<size_t>(kChatFormatCount));
}

TEST(ChatTemplate, ConversationPerFormat) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(apply(c.name, kConv, false), c.prompt);
    EXPECT_EQ(apply(c.name, kConv, true), std::string(c.prompt) + c.gen_prompt);
  }
}

// Formats without a system role fold it into the first user turn; without one there is
// nothing to fold.
TEST(ChatTemplate, NoSystemMessage) {
  const std::vector<ChatMessage> conv(kConv.begin() + 1, kConv.end());
  EXPECT_EQ(apply("gemma", conv, true),
            "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
            "<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(apply("llama2-sys", conv, true),
            "[INST] Hello [/INST]  Hi there  </s>[INST] Who are you [/INST]");
  EXPECT_EQ(apply("orion", conv, true),
            "Human: Hello\n\nAssistant: </s>  Hi there  </s>Human: Who are you\n\nAssistant: </s>");
  // Formats that write a default system block when the conversation has none.
  EXPECT_EQ(apply("bailing2", {{"user", "Hi"}}, true),
            "<role>SYSTEM</role>detailed thinking "
            "off<|role_end|><role>HUMAN</role>Hi<|role_end|><role>ASSISTANT</role>");
  EXPECT_EQ(apply("pangu-embedded", {{"user", "Hi"}}, false),
            "[unused9]系统：[unused10][unused9]用户：Hi[unused10]");
  EXPECT_EQ(apply("gigachat", {{"user", "Hi"}}, false),
            "<s>user<|role_sep|>Hi<|message_sep|>available functions<|role_sep|>[]<|message_sep|>");
}

TEST(ChatTemplate, GemmaMergesSystemIntoTheNextUserTurn) {
  // A system message after an assistant turn opens the next user turn, trimmed.
  const std::vector<ChatMessage> conv = {
      {"user", "a"}, {"assistant", "b"}, {"system", " rules "}, {"user", "c"}};
  EXPECT_EQ(apply("gemma", conv, false),
            "<start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n"
            "<start_of_turn>user\nrules\n\nc<end_of_turn>\n");
}

TEST(ChatTemplate, RwkvWorldOpensTheReplyOnlyAfterAUserMessage) {
  EXPECT_EQ(apply("rwkv-world", {{"user", "a"}, {"assistant", "b"}}, true), "User: a\n\nAssistant: b\n\n");
}

TEST(ChatTemplate, ToolAndDeveloperRoles) {
  const std::vector<ChatMessage> tool = {{"user", "weather?"}, {"tool", "{\"t\": 21}"}};
  EXPECT_EQ(apply("chatml", tool, true),
            "<|im_start|>user\nweather?<|im_end|>\n<|im_start|>tool\n{\"t\": "
            "21}<|im_end|>\n<|im_start|>assistant\n");
  // Llama 3.1 writes tool results under the ipython header.
  EXPECT_EQ(apply("llama3", tool, false),
            "<|start_header_id|>user<|end_header_id|>\n\nweather?<|eot_id|><|start_header_id|>ipython<|end_"
            "header_id|>"
            "\n\n{\"t\": 21}<|eot_id|>");
  EXPECT_EQ(
      apply("kimi-k2", tool, false),
      "<|im_user|>user<|im_middle|>weather?<|im_end|><|im_system|>tool<|im_middle|>{\"t\": 21}<|im_end|>");
  EXPECT_EQ(
      apply("gpt-oss", {{"developer", "Be brief."}, {"user", "Hi"}}, true),
      "<|start|>developer<|message|>Be brief.<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant");
}

TEST(ChatTemplate, RolesPerFormat) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(chat_format_roles(ChatFormat::chatml), (V{"system", "user", "assistant", "tool"}));
  EXPECT_EQ(chat_format_roles(ChatFormat::gemma), (V{"system", "user", "assistant"}));
  EXPECT_EQ(chat_format_roles(ChatFormat::gpt_oss), (V{"system", "user", "assistant", "developer"}));
  for (int i = 0; i < kChatFormatCount; ++i) {
    const V roles = chat_format_roles(static_cast<ChatFormat>(i));
    ASSERT_GE(roles.size(), 3u);
    EXPECT_EQ(V(roles.begin(), roles.begin() + 3), (V{"system", "user", "assistant"}));
  }
}

TEST(ChatTemplate, BadInput) {
  auto empty = chat_apply(ChatFormat::chatml, {}, true);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("no messages"), std::string::npos) << empty.message();

  auto bot = chat_apply(ChatFormat::llama3, std::vector<ChatMessage>{{"user", "a"}, {"bot", "b"}}, true);
  ASSERT_FALSE(bot.ok());
  EXPECT_EQ(bot.message(),
            "chat message 1: role \"bot\" is not supported by chat format \"llama3\" (roles: system, user, "
            "assistant, "
            "tool)");

  // Roles are case-sensitive, as in the OpenAI API; a role the format has no place for is refused.
  EXPECT_FALSE(chat_apply(ChatFormat::chatml, std::vector<ChatMessage>{{"User", "a"}}, true).ok());
  auto tool = chat_apply(ChatFormat::gemma, std::vector<ChatMessage>{{"user", "a"}, {"tool", "b"}}, true);
  ASSERT_FALSE(tool.ok());
  EXPECT_NE(tool.message().find("chat message 1: role \"tool\""), std::string::npos) << tool.message();
  EXPECT_NE(tool.message().find("\"gemma\""), std::string::npos) << tool.message();
  EXPECT_FALSE(chat_apply(ChatFormat::chatml, std::vector<ChatMessage>{{"developer", "a"}}, true).ok());

  // An odd role is quoted on one line.
  auto odd = chat_apply(ChatFormat::chatml, std::vector<ChatMessage>{{"a\nb", "x"}}, true);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.message().find("role \"a\\nb\""), std::string::npos) << odd.message();

  auto late_system =
      chat_apply(ChatFormat::gigachat, std::vector<ChatMessage>{{"user", "a"}, {"system", "s"}}, true);
  ASSERT_FALSE(late_system.ok());
  EXPECT_NE(late_system.message().find("chat message 1"), std::string::npos) << late_system.message();
  EXPECT_NE(late_system.message().find("only as the first message"), std::string::npos)
      << late_system.message();
}

TEST(ChatTemplate, EmptyContentIsAllowed) {
  EXPECT_EQ(apply("chatml", {{"user", ""}}, true), "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace strata
