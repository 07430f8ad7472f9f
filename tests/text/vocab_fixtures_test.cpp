// llama.cpp's tokenizer test vocabularies (fixtures/vocab, README §9): every test string must
// encode (add_special = false, parse_special = false) to exactly llama.cpp's ids, and decode back.
#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "text/text_test_util.h"

namespace strata {
namespace {

using testing::ids_to_string;
using testing::vocab_cases;
using testing::vocab_tokenizer;

class VocabFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabFixture, EncodesLikeLlamaCpp) {
  STRATA_REQUIRE_FIXTURES(dir);
  const std::string name = GetParam();
  const Tokenizer* tok = vocab_tokenizer(dir, name);
  ASSERT_NE(tok, nullptr);
  const auto cases = vocab_cases(dir, name);
  ASSERT_EQ(cases.size(), 46u);
  int pass = 0;
  for (const auto& c : cases) {
    const std::vector<int32_t> got = tok->encode(c.text, false, false);
    if (got == c.ids) {
      ++pass;
    } else {
      ADD_FAILURE() << name << ": '" << c.text << "'\n  want " << ids_to_string(c.ids) << "\n  got  "
                    << ids_to_string(got);
    }
  }
  std::printf("[ vocab    ] %-13s %d / %zu pass\n", name.c_str(), pass, cases.size());
  RecordProperty("pass", pass);
  EXPECT_EQ(pass, static_cast<int>(cases.size()));
}

TEST_P(VocabFixture, DecodeInvertsEncode) {
  STRATA_REQUIRE_FIXTURES(dir);
  const std::string name = GetParam();
  const Tokenizer* tok = vocab_tokenizer(dir, name);
  ASSERT_NE(tok, nullptr);
  for (const auto& c : vocab_cases(dir, name)) {
    EXPECT_EQ(tok->decode(tok->encode(c.text, false, false)), c.text) << name;
    // With BOS added, the hidden BOS piece takes llama.cpp's one-space strip, so SentencePiece
    // keeps its prefix space.
    const bool keeps_prefix = tok->add_space_prefix() && tok->add_bos() && !c.text.empty();
    EXPECT_EQ(tok->decode(tok->encode(c.text, true, false)), keeps_prefix ? " " + c.text : c.text) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabFixture,
                         ::testing::Values("qwen2", "llama-bpe", "llama-spm", "deepseek-llm", "gpt-2"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = (c == '-') ? '_' : c;
                           return s;
                         });

}  // namespace
}  // namespace strata
