// Byte-level BPE and pre-tokenizers on plain data (no fixtures needed).
#include <gtest/gtest.h>

#include "text/bpe.h"
#include "text/pre_tokenizer.h"
#include "text/text_test_util.h"
#include "text/utf8.h"

namespace strata {
namespace {

using testing::tiny_bpe_data;
using text::TokenType;

std::unique_ptr<Tokenizer> make(text::VocabData d) {
  auto t = Tokenizer::from_data(std::move(d));
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.message());
  return t.ok() ? std::move(t).value() : nullptr;
}

std::vector<std::string> split(const std::string& pre, const std::string& text) {
  auto info = text::pre_tokenizer_info(pre);
  EXPECT_TRUE(info.ok()) << pre;
  auto pt = text::PreTokenizer::create(info->regexes);
  EXPECT_TRUE(pt.ok()) << (pt.ok() ? "" : pt.message());
  return (*pt)->split(text);
}

using Words = std::vector<std::string>;

TEST(ByteAlphabet, IsABijectionOverBytes) {
  for (int b = 0; b < 256; ++b) {
    const uint32_t c = text::byte_to_cpt(static_cast<uint8_t>(b));
    EXPECT_EQ(text::cpt_to_byte(c), b);
  }
  EXPECT_EQ(text::byte_to_cpt(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(text::byte_to_cpt('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(text::byte_to_cpt('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(text::cpt_to_byte(0x4E00), -1);
}

TEST(Utf8, InvalidBytesBecomeReplacementOneByteAtATime) {
  const auto cpts = text::utf8_decode("a\xff\xe2\x96z");
  ASSERT_EQ(cpts.size(), 5u);
  EXPECT_EQ(cpts[1], text::kReplacementChar);
  EXPECT_EQ(cpts[2], text::kReplacementChar);  // truncated 3-byte sequence: the lead byte alone
  EXPECT_EQ(cpts[3], text::kReplacementChar);  // then the stray continuation byte
  EXPECT_EQ(cpts[4], static_cast<uint32_t>('z'));
  EXPECT_EQ(text::utf8_encode(text::utf8_decode("h\xc3\xa9 \xf0\x9f\xa6\x99")), "h\xc3\xa9 \xf0\x9f\xa6\x99");
}

TEST(PreTokenizer, Gpt2SplitsWordsSpacesAndContractions) {
  EXPECT_EQ(split("gpt-2", "Hello world's  end  "), (Words{"Hello", " world", "'s", " ", " end", "  "}));
  EXPECT_EQ(split("gpt-2", "a\u00a0\u0085b"), (Words{"a", "\u00a0", "\u0085", "b"}));  // NBSP, NEL are \s
}

TEST(PreTokenizer, Llama3GroupsDigitsByThreeAndKeepsNewlines) {
  EXPECT_EQ(split("llama-bpe", "1234567 x\n\n y"), (Words{"123", "456", "7", " x", "\n\n", " y"}));
  EXPECT_EQ(split("llama-bpe", "I'VE"), (Words{"I", "'VE"}));
}

TEST(PreTokenizer, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(split("qwen2", "x 123"), (Words{"x", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, DefaultSplitsPunctuationFirst) {
  EXPECT_EQ(split("default", "ab, 1234!"), (Words{"ab", ",", " ", "123", "4", "!"}));
}

TEST(PreTokenizer, Gpt4oSplitsCamelCaseAndContractions) {
  EXPECT_EQ(split("gpt-4o", "HelloWorld they're 12345"),
            (Words{"Hello", "World", " they're", " ", "123", "45"}));
  EXPECT_EQ(split("gpt-4o", "a/\nb"), (Words{"a", "/\n", "b"}));
}

TEST(PreTokenizer, JoyaiSplitsDigitsCjkAndPunctuationWords) {
  // Digits by three first, then CJK/kana runs, then the main split (".word" stays together).
  EXPECT_EQ(split("joyai-llm", "12345\xe4\xbd\xa0\xe5\xa5\xbd.cpp x"),
            (Words{"123", "45", "\xe4\xbd\xa0\xe5\xa5\xbd", ".cpp", " x"}));
}

TEST(PreTokenizer, DeepseekLlmTrailingWhitespaceAndNewlines) {
  EXPECT_EQ(split("deepseek-llm", "ab\ncd  "), (Words{"ab", "\n", "cd", "  "}));
}

TEST(PreTokenizer, NonAsciiWhitespaceIsOnlyWhitespace) {
  // llama.cpp shows regexes U+000B in place of any non-ASCII White_Space: U+1680 (inside
  // deepseek's U+0800-U+4E00 CJK range) still joins the next word as its \s? prefix, and U+3000
  // (listed in deepseek's punctuation class) is not punctuation.
  EXPECT_EQ(split("deepseek-llm", "\xe1\x9a\x80\xd0\x96"), (Words{"\xe1\x9a\x80\xd0\x96"}));
  EXPECT_EQ(split("deepseek-llm", "a\xe3\x80\x80!"), (Words{"a", "\xe3\x80\x80!"}));
}

TEST(PreTokenizer, AllFamiliesCompileAndCoverTheInput) {
  const std::string text = "Hello, y'all! 1234 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\xa6\x99\t\n  x\xff";
  for (const char* pre :
       {"default", "gpt-2", "llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder", "deepseek-v3",
        "joyai-llm", "gpt-4o", "tekken", "starcoder", "command-r", "falcon", "dbrx", "stablelm2"}) {
    std::string joined;
    for (const std::string& w : split(pre, text)) {
      EXPECT_FALSE(w.empty()) << pre;
      joined += w;
    }
    // Invalid UTF-8 comes back as U+FFFD, everything else unchanged.
    EXPECT_EQ(joined, text.substr(0, text.size() - 1) + "\xef\xbf\xbd") << pre;
  }
}

TEST(PreTokenizer, UnknownNameIsAnError) {
  auto info = text::pre_tokenizer_info("no-such-pre");
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.message().find("no-such-pre"), std::string::npos);
}

TEST(PreTokenizer, WhitespaceEscapesExpand) {
  auto p = text::expand_whitespace_escapes(R"([^\s\p{L}]\s+(?!\S))");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->find("\\s"), std::string::npos);
  EXPECT_NE(p->find("\\x{85}"), std::string::npos);
  EXPECT_FALSE(text::expand_whitespace_escapes("[abc").ok());
}

TEST(Bpe, MergesApplyLowestRankFirst) {
  // "a b" beats "b c": "abc" -> ab c. With the ranks swapped: a bc.
  auto t1 = make(tiny_bpe_data({"a b", "b c"}));
  auto t2 = make(tiny_bpe_data({"b c", "a b"}));
  ASSERT_TRUE(t1 && t2);
  EXPECT_EQ(t1->encode("abc", false, false), (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(t2->encode("abc", false, false), (std::vector<int32_t>{'a', 256}));
}

TEST(Bpe, MergesChainAndTieBreakLeftmost) {
  // "l l" can merge at two places in "lll": the leftmost wins.
  auto t = make(tiny_bpe_data({"h e", "l l", "he ll", "hell o"}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("hello", false, false), (std::vector<int32_t>{259}));
  EXPECT_EQ(t->encode("lll", false, false), (std::vector<int32_t>{257, 'l'}));
  // Spaces are byte-level encoded ("Ġ" = 256 + 32 = id 32's alphabet char) and split by gpt-2.
  EXPECT_EQ(t->encode("he hello", false, false), (std::vector<int32_t>{256, ' ', 259}));
  EXPECT_EQ(t->decode(t->encode("he hello", false, false)), "he hello");
}

TEST(Bpe, EveryByteRoundTrips) {
  auto t = make(tiny_bpe_data({"a b"}));
  ASSERT_TRUE(t);
  std::string all;
  for (int b = 1; b < 256; ++b) all.push_back(static_cast<char>(b));
  // Invalid UTF-8 is replaced before BPE (as llama.cpp does), so only check valid text fully.
  const std::string valid = "tab\there \xc3\xa9\xe2\x82\xac\xf0\x9f\xa6\x99 ab\r\n";
  EXPECT_EQ(t->decode(t->encode(valid, false, false)), valid);
  for (int32_t id : t->encode(all, false, false)) EXPECT_TRUE(id >= 0 && id < t->n_vocab());
}

TEST(Bpe, TokenToPieceMapsAlphabetBack) {
  auto t = make(tiny_bpe_data({"Ġ w"}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->token_text(256), "\xc4\xa0w");
  EXPECT_EQ(t->token_to_piece(256), " w");
  EXPECT_EQ(t->token_to_piece(10), "\n");
  EXPECT_EQ(t->token_to_piece(-1), "");
  EXPECT_EQ(t->token_to_piece(1 << 20), "");
}

TEST(Bpe, LargeInputIsFast) {
  auto t = make(tiny_bpe_data({"a b", "ab ab"}));
  ASSERT_TRUE(t);
  std::string s;
  for (int i = 0; i < 20000; ++i) s += "abab x ";
  const auto ids = t->encode(s, false, false);
  EXPECT_EQ(t->decode(ids), s);
}

}  // namespace
}  // namespace strata
