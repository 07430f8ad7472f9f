// Hugging Face tokenizer.json (byte-level BPE) on a hand-written file: merges, byte fallback and
// unk for unseen bytes, added tokens (special / not, lstrip / rstrip), BOS from the
// post-processor and tokenizer_config.json, the HF regex dialect, and errors naming file + field.
// No network, no fixtures.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/pre_tokenizer.h"
#include "text/tokenizer.h"

namespace strata {
namespace {

using Ids = std::vector<int32_t>;

// Vocab: 0 <unk>, 1 <s>, 2 </s>, 3..10 single characters, 11..19 merge results, 20..23 byte
// fallback tokens, then added tokens 24 "<|user|>" (special, rstrip), 25 "[MASK]" (lstrip) and two
// that overlap, 28 "<ab" and 29 "b>hello".
// Byte 0xC3 is "Ã" (UTF-8 C3 83) in the byte alphabet, byte 0xA9 is "©" (C2 A9).
std::string tiny_json(const std::string& model_extra = R"("byte_fallback": true, "fuse_unk": true,)",
                      const std::string& pre = R"({"type": "Sequence", "pretokenizers": [
          {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated", "invert": false},
          {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})",
                      const std::string& normalizer = "null") {
  return R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 24, "content": "<|user|>", "single_word": false, "lstrip": false, "rstrip": true, "normalized": false, "special": true},
    {"id": 25, "content": "[MASK]", "single_word": false, "lstrip": true, "rstrip": false, "normalized": true, "special": false},
    {"id": 28, "content": "<ab", "special": false},
    {"id": 29, "content": "b>hello", "special": false}
  ],
  "normalizer": )" +
         normalizer + R"(,
  "pre_tokenizer": )" +
         pre + R"(,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
             {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
    "end_of_word_suffix": null, )" +
         model_extra + R"(
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "h": 3, "e": 4, "l": 5, "o": 6, "\u0120": 7, "w": 8, "r": 9, "d": 10,
      "he": 11, "ll": 12, "llo": 13, "hello": 14, "\u0120w": 15, "or": 16, "\u0120wor": 17, "\u0120worl": 18,
      "\u0120world": 19, "<0xC3>": 20, "<0x83>": 21, "<0xC2>": 22, "<0xA9>": 23, "1": 26, "2": 27},
    "merges": ["h e", "l l", "ll o", "he llo", "\u0120 w", "o r", ["\u0120w", "or"], "\u0120wor l", "\u0120worl d"]
  }
})";
}

std::unique_ptr<Tokenizer> load(const std::string& json, const std::string& config = "") {
  auto t = Tokenizer::from_json(json, config, "tiny/tokenizer.json");
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.message());
  return t.ok() ? std::move(t).value() : nullptr;
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

// The error of loading `json`; "" (with a failure) when it loads.
std::string load_error(const std::string& json, const std::string& config = "") {
  auto t = Tokenizer::from_json(json, config, "tiny/tokenizer.json", "tiny/tokenizer_config.json");
  EXPECT_FALSE(t.ok());
  return t.ok() ? std::string() : t.message();
}

TEST(TokenizerJson, AppliesMergesByRank) {
  auto tok = load(tiny_json());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 30);
  EXPECT_EQ(tok->encode("hello world", false, false), (Ids{14, 19}));
  EXPECT_EQ(tok->encode("hello", false, false), (Ids{14}));
  EXPECT_EQ(tok->encode("hell", false, false), (Ids{11, 12}));  // "l l" outranks "e l" (no such merge)
  EXPECT_EQ(tok->encode(" wor", false, false), (Ids{17}));
  EXPECT_EQ(tok->encode("12", false, false), (Ids{26, 27}));  // the \p{N} Split isolates each digit
  EXPECT_EQ(tok->decode({14, 19}), "hello world");
  EXPECT_EQ(tok->model_name(), "gpt2");
  EXPECT_EQ(tok->pre_name(), "tokenizer.json");
}

TEST(TokenizerJson, UnseenBytesFallBackToByteTokensThenUnk) {
  auto tok = load(tiny_json());
  ASSERT_NE(tok, nullptr);
  // "é" = C3 A9 -> alphabet "Ã©" -> the UTF-8 bytes of each alphabet character as <0xXX>.
  EXPECT_EQ(tok->encode("h\xc3\xa9", false, false), (Ids{3, 20, 21, 22, 23}));
  // No <0x7A> token: unk, and fuse_unk makes a run of them one unk.
  EXPECT_EQ(tok->encode("hz", false, false), (Ids{3, 0}));
  EXPECT_EQ(tok->encode("zqz", false, false), (Ids{0}));
  EXPECT_EQ(tok->encode("zhz", false, false), (Ids{0, 3, 0}));

  // Without fuse_unk every unknown byte is one unk; without byte_fallback "é" is unk too.
  auto plain = load(tiny_json(R"("byte_fallback": false, "fuse_unk": false,)"));
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->encode("zqz", false, false), (Ids{0, 0, 0}));
  EXPECT_EQ(plain->encode("h\xc3\xa9", false, false), (Ids{3, 0, 0}));
}

TEST(TokenizerJson, NfcNormalizerComposesBeforeSplitting) {
  const std::string pre = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";
  auto tok = load(tiny_json(R"("byte_fallback": true, "fuse_unk": true,)", pre, R"({"type": "NFC"})"));
  auto raw = load(tiny_json(R"("byte_fallback": true, "fuse_unk": true,)", pre,
                            R"({"type": "Sequence", "normalizers": []})"));
  ASSERT_NE(tok, nullptr);
  ASSERT_NE(raw, nullptr);
  // "e" + U+0301 composes to U+00E9 (C3 A9): the byte-fallback ids of "Ã©".
  EXPECT_EQ(tok->encode("he\xcc\x81", false, false), (Ids{3, 20, 21, 22, 23}));
  EXPECT_EQ(raw->encode("he\xcc\x81", false, false), (Ids{11, 0}));  // no <0xCC>: unk
  // Added tokens are split out first; invalid UTF-8 still encodes.
  EXPECT_EQ(tok->encode("e\xcc\x81[MASK]hello", false, false), (Ids{20, 21, 22, 23, 25, 14}));
  EXPECT_FALSE(tok->encode("\xff\xfe h", false, false).empty());
}

TEST(TokenizerJson, AddedTokensSplitAndStrip) {
  auto tok = load(tiny_json());
  ASSERT_NE(tok, nullptr);
  // Non-special added tokens always split; "[MASK]" (lstrip) swallows the spaces before it.
  EXPECT_EQ(tok->encode("hello   [MASK] world", false, false), (Ids{14, 25, 19}));
  EXPECT_EQ(tok->token_type(25), text::TokenType::user_defined);
  // Special tokens split with parse_special (as HF always does); "<|user|>" (rstrip) swallows
  // the whitespace after it.
  EXPECT_EQ(tok->encode("<s><|user|> \t hello", false, true), (Ids{1, 24, 14}));
  EXPECT_EQ(tok->token_type(24), text::TokenType::control);
  EXPECT_TRUE(tok->is_control(1));
  EXPECT_EQ(tok->decode({1, 14}, /*special=*/true), "<s>hello");
  EXPECT_EQ(tok->decode({1, 14}), "hello");
  // Leftmost-longest, as HF matches added tokens ("b>hello" is longer but starts later).
  EXPECT_EQ(tok->encode("<ab>hello", false, false), (Ids{28, 0, 14}));
  EXPECT_EQ(tok->encode("a b>hello", false, false), (Ids{0, 7, 29}));
}

TEST(TokenizerJson, BosFromPostProcessorAndConfig) {
  auto tok = load(tiny_json());
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->encode("hello", true, false), (Ids{1, 14}));
  EXPECT_EQ(tok->unk_id(), 0);

  // tokenizer_config.json overrides the post-processor and names eos.
  auto cfg = load(tiny_json(), R"({"add_bos_token": false, "eos_token": {"content": "</s>", "lstrip": false},
                                   "bos_token": "<s>"})");
  ASSERT_NE(cfg, nullptr);
  EXPECT_FALSE(cfg->add_bos());
  EXPECT_EQ(cfg->eos_id(), 2);
  EXPECT_TRUE(cfg->is_eog(2));
  EXPECT_EQ(cfg->encode("hello", true, false), (Ids{14}));
}

TEST(TokenizerJson, HfRegexDialectSeesCodePointsAsTheyAre) {
  // llama.cpp shows non-ASCII White_Space to its regexes as U+000B; HF does not.
  for (auto dialect : {text::RegexDialect::llama_cpp, text::RegexDialect::huggingface}) {
    auto pt = text::PreTokenizer::create({"\\x{3000}"}, dialect);
    ASSERT_TRUE(pt.ok()) << pt.message();
    const auto words = (*pt)->split("a\u3000b");
    if (dialect == text::RegexDialect::huggingface) {
      EXPECT_EQ(words, (std::vector<std::string>{"a", "\u3000", "b"}));
    } else {
      EXPECT_EQ(words, (std::vector<std::string>{"a\u3000b"}));
    }
  }
  // Oniguruma's `$` also matches before a line break.
  auto pt = text::PreTokenizer::create({"x$"}, text::RegexDialect::huggingface);
  ASSERT_TRUE(pt.ok()) << pt.message();
  EXPECT_EQ((*pt)->split("ax\nb"), (std::vector<std::string>{"a", "x", "\nb"}));
}

TEST(TokenizerJson, AddPrefixSpaceAndStringPatterns) {
  auto tok = load(tiny_json(
      R"("byte_fallback": true, "fuse_unk": true,)",
      R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true})"));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("world", false, false), (Ids{19}));
  EXPECT_EQ(tok->encode(" world", false, false), (Ids{19}));

  auto str =
      load(tiny_json(R"("byte_fallback": true, "fuse_unk": true,)", R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"String": "l."}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})"));
  ASSERT_NE(str, nullptr);
  // "l." is literal text (not "l" + any character): "hello" stays one word.
  EXPECT_EQ(str->encode("hello", false, false), (Ids{14}));
}

TEST(TokenizerJson, ErrorsNameTheFileAndTheField) {
  std::string e = load_error(R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  EXPECT_NE(e.find("tiny/tokenizer.json"), std::string::npos) << e;
  EXPECT_NE(e.find("model.type"), std::string::npos) << e;
  EXPECT_NE(e.find("WordPiece"), std::string::npos) << e;
  e = load_error(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})");
  EXPECT_NE(e.find("'Unigram' is not supported"), std::string::npos) << e;
  e = load_error(R"({"model": {"type": "BPE", "vocab": {"a": 0})");
  EXPECT_NE(e.find("tiny/tokenizer.json: not valid JSON"), std::string::npos) << e;
  e = load_error("[1, 2]");
  EXPECT_NE(e.find("not a JSON object"), std::string::npos) << e;

  e = load_error(replaced(tiny_json(), "\"he llo\"", "\"h ll\""));  // "hll" is not a token
  EXPECT_NE(e.find("model.merges[3]: 'hll' is not in model.vocab"), std::string::npos) << e;

  e = load_error(replaced(tiny_json(), "\"Isolated\"", "\"Removed\""));
  EXPECT_NE(e.find("pre_tokenizer.pretokenizers[0].behavior"), std::string::npos) << e;

  e = load_error(tiny_json(R"("byte_fallback": true,)",
                           R"({"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true})"));
  EXPECT_NE(e.find("pre_tokenizer.type: 'Metaspace' is not supported"), std::string::npos) << e;
  e = load_error(tiny_json(R"("byte_fallback": true,)",
                           R"({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated"})"));
  EXPECT_NE(e.find("has no ByteLevel step"), std::string::npos) << e;
  e = load_error(
      tiny_json(R"("byte_fallback": true,)", R"({"type": "ByteLevel"})", R"({"type": "Lowercase"})"));
  EXPECT_NE(e.find("normalizer.type: 'Lowercase' is not supported"), std::string::npos) << e;
  e = load_error(tiny_json(R"("continuing_subword_prefix": "##",)"));
  EXPECT_NE(e.find("model.continuing_subword_prefix"), std::string::npos) << e;

  e = load_error(replaced(tiny_json(), "\"id\": 25", "\"id\": 3"));  // "[MASK]" on the id of "h"
  EXPECT_NE(e.find("added_tokens[4]: id 3 is '[MASK]' but already 'h'"), std::string::npos) << e;

  e = load_error(replaced(tiny_json(), "\"id\": 25", "\"id\": 2000000000"));
  EXPECT_NE(e.find("added_tokens[4]: id 2000000000 is out of range"), std::string::npos) << e;

  e = load_error(tiny_json(), R"({"eos_token": "<eos>"})");
  EXPECT_NE(e.find("tiny/tokenizer_config.json: eos_token: token '<eos>' is not in the vocabulary"),
            std::string::npos)
      << e;

  auto missing = Tokenizer::from_json_file("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("/nonexistent/tokenizer.json"), std::string::npos) << missing.message();
}

}  // namespace
}  // namespace strata
