// SentencePiece tokenizer on a hand-built vocab (no fixtures needed).
#include <gtest/gtest.h>

#include <cstdio>

#include "text/tokenizer.h"

namespace strata {
namespace {

using text::TokenType;

// <unk> <s> </s>, 256 byte tokens (ids 3..258), then scored pieces (ids 259..).
text::VocabData tiny_spm_data() {
  text::VocabData d;
  d.model = "llama";
  d.pre = "default";
  auto add = [&](const std::string& t, float score, TokenType type) {
    d.tokens.push_back(t);
    d.scores.push_back(score);
    d.token_types.push_back(static_cast<int32_t>(type));
  };
  add("<unk>", 0, TokenType::unknown);
  add("<s>", 0, TokenType::control);
  add("</s>", 0, TokenType::control);
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    add(hex, 0, TokenType::byte);
  }
  const std::pair<const char*, float> pieces[] = {
      {"\xe2\x96\x81", -1},      {"h", -2},  {"e", -2},   {"l", -2},  {"o", -2},
      {"\xe2\x96\x81h", -5},     {"ll", -3}, {"llo", -4}, {"he", -4}, {"\xe2\x96\x81he", -6},
      {"\xe2\x96\x81hello", -7},
  };
  for (const auto& [t, s] : pieces) add(t, s, TokenType::normal);
  d.bos_id = 1;
  d.eos_id = 2;
  d.unk_id = 0;
  return d;
}

constexpr int32_t kSpace = 259, kH = 260, kE = 261, kL = 262, kHello = 269;
constexpr int32_t byte_id(uint8_t b) {
  return 3 + b;
}

std::unique_ptr<Tokenizer> make(text::VocabData d) {
  auto t = Tokenizer::from_data(std::move(d));
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.message());
  return t.ok() ? std::move(t).value() : nullptr;
}

TEST(Spm, MergesByScoreWithSpacePrefix) {
  auto t = make(tiny_spm_data());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->model_name(), "llama");
  EXPECT_TRUE(t->add_space_prefix());
  EXPECT_TRUE(t->add_bos());
  EXPECT_EQ(t->encode("hello", false, false), (std::vector<int32_t>{kHello}));
  EXPECT_EQ(t->encode("hello", true, false), (std::vector<int32_t>{1, kHello}));
  // "hel" -> ▁he l (▁he outscores everything else that can form).
  EXPECT_EQ(t->encode("hel", false, false), (std::vector<int32_t>{268, kL}));
  EXPECT_EQ(t->decode({kHello}), "hello");
  EXPECT_EQ(t->decode({kSpace, kH, kE}), "he");  // the first piece loses the prefix space
}

TEST(Spm, UnknownCharactersFallBackToBytes) {
  auto t = make(tiny_spm_data());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("h\xc3\xa9", false, false), (std::vector<int32_t>{264, byte_id(0xC3), byte_id(0xA9)}));
  const std::string s = "hello h\xc3\xa9\xe2\x82\xac\n\tx";
  EXPECT_EQ(t->decode(t->encode(s, false, false)), s);
  EXPECT_EQ(t->token_to_piece(byte_id('\n')), "\n");
}

TEST(Spm, NoSpacePrefixWhenMetadataSaysSo) {
  auto d = tiny_spm_data();
  d.add_space_prefix = false;
  auto t = make(std::move(d));
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->add_space_prefix());
  EXPECT_EQ(t->encode("he", false, false), (std::vector<int32_t>{267}));
  EXPECT_EQ(t->decode(t->encode(" he", false, false)), " he");
}

TEST(Spm, SpacePrefixAfterSpecialTokens) {
  auto t = make(tiny_spm_data());
  ASSERT_TRUE(t);
  // "</s>" is a control token: split out with parse_special, and the text after it gets "▁".
  EXPECT_EQ(t->encode("hello</s>hello", false, true), (std::vector<int32_t>{kHello, 2, kHello}));
  EXPECT_EQ(t->decode(t->encode("hello</s>hello", false, true), true), "hello</s> hello");
  EXPECT_EQ(t->token_to_piece(2), "");
  EXPECT_EQ(t->token_to_piece(2, true), "</s>");
  EXPECT_TRUE(t->is_eog(2));
  EXPECT_TRUE(t->is_control(0));
  EXPECT_EQ(t->token_type(5), TokenType::byte);
}

TEST(Spm, EmptyTextGivesNoTokens) {
  auto t = make(tiny_spm_data());
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->encode("", false, false).empty());
  EXPECT_EQ(t->encode("", true, false), (std::vector<int32_t>{1}));
}

}  // namespace
}  // namespace strata
