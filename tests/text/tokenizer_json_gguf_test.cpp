// The shared GGUF vocabs (fixtures/vocab, README §9) written as tokenizer.json and read back: the
// tokenizer.json path must give llama.cpp's .out ids too, and agree with the GGUF path on BOS.
#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "text/text_test_util.h"
#include "text/tokenizer_json_writer.h"

namespace strata {
namespace {

using testing::ids_to_string;
using testing::vocab_cases;
using testing::vocab_tokenizer;

class VocabAsJson : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabAsJson, GivesTheSameIdsAsTheGguf) {
  STRATA_REQUIRE_FIXTURES(dir);
  const std::string name = GetParam();
  const std::string path = dir + "/vocab/ggml-vocab-" + name + ".gguf";
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  auto data = read_vocab_data(**file);
  ASSERT_TRUE(data.ok()) << data.message();
  auto json = text::to_tokenizer_json(*data);
  ASSERT_TRUE(json.ok()) << json.message();
  auto tok = Tokenizer::from_json(*json, "", name + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.message();
  const Tokenizer* gguf = vocab_tokenizer(dir, name);
  ASSERT_NE(gguf, nullptr);
  EXPECT_EQ((*tok)->n_vocab(), gguf->n_vocab());
  EXPECT_EQ((*tok)->add_bos(), gguf->add_bos());

  const auto cases = vocab_cases(dir, name);
  ASSERT_EQ(cases.size(), 46u);
  int pass = 0;
  for (const auto& c : cases) {
    const std::vector<int32_t> got = (*tok)->encode(c.text, false, false);
    if (got == c.ids) {
      ++pass;
    } else {
      ADD_FAILURE() << name << ": '" << c.text << "'\n  want " << ids_to_string(c.ids) << "\n  got  "
                    << ids_to_string(got);
    }
    EXPECT_EQ((*tok)->decode(got), c.text) << name;
    EXPECT_EQ((*tok)->encode(c.text, true, true), gguf->encode(c.text, true, true))
        << name << ": '" << c.text << "'";
  }
  std::printf("[ json     ] %-13s %d / %zu pass\n", name.c_str(), pass, cases.size());
  EXPECT_EQ(pass, static_cast<int>(cases.size()));
}

// llama-spm is SentencePiece (scores, no merges): not a byte-level BPE tokenizer.json.
INSTANTIATE_TEST_SUITE_P(Vocabs, VocabAsJson,
                         ::testing::Values("qwen2", "llama-bpe", "deepseek-llm", "gpt-2"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = (c == '-') ? '_' : c;
                           return s;
                         });

TEST(VocabAsJson, RefusesSentencePieceVocabs) {
  text::VocabData d;
  d.model = "llama";
  d.tokens = {"<unk>", "a"};
  auto json = text::to_tokenizer_json(d);
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.message().find("'llama'"), std::string::npos) << json.message();
}

}  // namespace
}  // namespace strata
