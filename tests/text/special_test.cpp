// Special tokens: parse_special splitting, user-defined tokens, BOS/EOS rules, end-of-generation.
#include <gtest/gtest.h>

#include "text/text_test_util.h"
#include "text/tokenizer.h"

namespace strata {
namespace {

using testing::tiny_bpe_data;
using text::TokenType;

// ids: 0..255 bytes, 256 "ab", 257 <|im_start|>, 258 <|im_end|>, 259 <tool>, 260 <tool>x,
// 261 <|endoftext|> (typed normal in the file), 262 <|unused_0|>.
text::VocabData chat_data() {
  return tiny_bpe_data({"a b"}, {{"<|im_start|>", TokenType::control},
                                 {"<|im_end|>", TokenType::control},
                                 {"<tool>", TokenType::user_defined},
                                 {"<tool>x", TokenType::user_defined},
                                 {"<|endoftext|>", TokenType::normal},
                                 {"<|unused_0|>", TokenType::control}});
}

std::unique_ptr<Tokenizer> make(text::VocabData d) {
  auto t = Tokenizer::from_data(std::move(d));
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.message());
  return t.ok() ? std::move(t).value() : nullptr;
}

using Ids = std::vector<int32_t>;

TEST(Special, ParseSpecialSplitsControlTokens) {
  auto t = make(chat_data());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("<|im_start|>ab<|im_end|>", false, true), (Ids{257, 256, 258}));
  // Without parse_special the same text is plain text: no control ids, and it round-trips.
  const Ids plain = t->encode("<|im_start|>ab<|im_end|>", false, false);
  for (int32_t id : plain) EXPECT_FALSE(t->is_control(id)) << "control token leaked from plain text";
  EXPECT_EQ(t->decode(plain), "<|im_start|>ab<|im_end|>");
  // Adjacent specials and specials at the edges.
  EXPECT_EQ(t->encode("<|im_end|><|im_start|>", false, true), (Ids{258, 257}));
}

TEST(Special, UserDefinedTokensAlwaysSplitLongestFirst) {
  auto t = make(chat_data());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("ab<tool>ab", false, false), (Ids{256, 259, 256}));
  EXPECT_EQ(t->encode("<tool>xab", false, false), (Ids{260, 256}));
  EXPECT_EQ(t->token_to_piece(259), "<tool>");  // user-defined pieces are always shown
}

TEST(Special, ControlPiecesHiddenUnlessAsked) {
  auto t = make(chat_data());
  ASSERT_TRUE(t);
  const Ids ids = t->encode("<|im_start|>ab<|im_end|>", false, true);
  EXPECT_EQ(t->decode(ids), "ab");
  EXPECT_EQ(t->decode(ids, true), "<|im_start|>ab<|im_end|>");
  EXPECT_TRUE(t->is_control(257));
  EXPECT_FALSE(t->is_control(256));
}

TEST(Special, EndOfGenerationByTextAndMetadata) {
  auto t = make(chat_data());
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->is_eog(258));  // <|im_end|>
  EXPECT_TRUE(t->is_eog(261));  // <|endoftext|>, and it becomes a control token
  EXPECT_EQ(t->token_type(261), TokenType::control);
  EXPECT_EQ(t->eot_id(), 258);
  EXPECT_FALSE(t->is_eog(257));
  EXPECT_FALSE(t->is_eog(-1));
  EXPECT_EQ(t->token_type(262), TokenType::control);

  auto d = chat_data();
  d.eos_id = 257;
  d.eot_id = 256;
  auto t2 = make(std::move(d));
  ASSERT_TRUE(t2);
  EXPECT_EQ(t2->eos_id(), 257);
  EXPECT_EQ(t2->eot_id(), 256);
  EXPECT_TRUE(t2->is_eog(257));
  EXPECT_TRUE(t2->is_eog(256));
}

TEST(Special, BosEosFollowMetadata) {
  auto d = chat_data();
  d.bos_id = 257;
  d.eos_id = 258;
  d.add_bos = true;
  d.add_eos = true;
  auto t = make(std::move(d));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->bos_id(), 257);
  EXPECT_TRUE(t->add_bos());
  EXPECT_TRUE(t->add_eos());
  EXPECT_EQ(t->encode("ab", true, false), (Ids{257, 256, 258}));
  EXPECT_EQ(t->encode("ab", false, false), (Ids{256}));
  EXPECT_EQ(t->encode("", true, false), (Ids{257, 258}));

  // Defaults: gpt-2 adds nothing; llama-bpe (llama3) adds BOS unless the metadata says no.
  auto plain = make(chat_data());
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->add_bos());
  EXPECT_EQ(plain->bos_id(), -1);
  EXPECT_EQ(plain->encode("ab", true, false), (Ids{256}));
  auto l3 = chat_data();
  l3.pre = "llama-bpe";
  l3.bos_id = 257;
  auto t3 = make(std::move(l3));
  ASSERT_TRUE(t3);
  EXPECT_TRUE(t3->add_bos());
  EXPECT_EQ(t3->encode("ab", true, false), (Ids{257, 256}));
}

TEST(Special, AddBosWithoutBosIsAnError) {
  auto d = chat_data();
  d.add_bos = true;
  auto t = Tokenizer::from_data(std::move(d));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("add_bos_token"), std::string::npos) << t.message();
}

TEST(Special, OutOfRangeIdsInMetadataAreIgnored) {
  auto d = chat_data();
  d.bos_id = 100000;
  d.eos_id = -5;
  auto t = make(std::move(d));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->bos_id(), -1);
  EXPECT_EQ(t->eos_id(), -1);
}

}  // namespace
}  // namespace strata
