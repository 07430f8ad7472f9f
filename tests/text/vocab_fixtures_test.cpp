// llama.cpp's tokenizer test vocabularies (fixtures/vocab, README §9): every test string must
// encode (add_special = false, parse_special = false) to exactly llama.cpp's ids, and decode back.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "common/fixtures.h"
#include "text/text_test_util.h"

namespace strata {
namespace {

using testing::ids_to_string;
using testing::vocab_cases;
using testing::vocab_tokenizer;

class VocabFixture : public ::testing::TestWithParam<const char*> {};

// One test per vocab so a ctest run (one process per test) loads each vocab file once.
TEST_P(VocabFixture, EncodesAndDecodesLikeLlamaCpp) {
  STRATA_REQUIRE_FIXTURES(dir);
  const std::string name = GetParam();
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer* tok = vocab_tokenizer(dir, name);
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
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
    EXPECT_EQ(tok->decode(got), c.text) << name << ": decode(encode(s)) != s";
    // With BOS added, the hidden BOS piece takes llama.cpp's one-space strip, so SentencePiece
    // keeps its prefix space.
    const bool keeps_prefix = tok->add_space_prefix() && tok->add_bos() && !c.text.empty();
    EXPECT_EQ(tok->decode(tok->encode(c.text, true, false)), keeps_prefix ? " " + c.text : c.text) << name;
  }
  std::printf("[ vocab    ] %-13s %d / %zu pass (load %.0f ms)\n", name.c_str(), pass, cases.size(), load_ms);
  RecordProperty("pass", pass);
  EXPECT_EQ(pass, static_cast<int>(cases.size()));

  // Any bytes are accepted: random input never crashes and gives in-range ids.
  std::mt19937 rng(42);
  for (int i = 0; i < 50; ++i) {
    std::string junk(rng() % 200, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    for (bool special : {false, true}) {
      for (int32_t id : tok->encode(junk, true, special)) ASSERT_TRUE(id >= 0 && id < tok->n_vocab()) << name;
    }
  }
  // Every special token's own text, parsed as special, is that one token.
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    if (tok->token_type(id) != text::TokenType::control) continue;
    EXPECT_EQ(tok->encode(tok->token_text(id), false, true), std::vector<int32_t>{id}) << name << " " << id;
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
