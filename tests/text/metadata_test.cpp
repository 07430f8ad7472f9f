// Loading tokenizers from GGUF metadata: the fixture models, and bad metadata that must give a
// clear error naming the problem (never a crash).
#include <gtest/gtest.h>

#include <filesystem>

#include "common/fixtures.h"
#include "format/gguf.h"
#include "text/text_test_util.h"
#include "text/tokenizer.h"

namespace strata {
namespace {

using testing::MemGguf;
using testing::tiny_bpe_data;
using text::TokenType;

// An in-memory GGUF with the metadata `fill` writes.
MemGguf write_gguf(const std::function<void(GgufWriter&)>& fill) {
  return testing::mem_gguf(fill, "test.gguf");
}

void put_bpe(GgufWriter& w, const text::VocabData& d) {
  w.set_string("tokenizer.ggml.model", d.model);
  w.set_string("tokenizer.ggml.pre", d.pre);
  w.set_array_string("tokenizer.ggml.tokens", d.tokens);
  w.set_array_i32("tokenizer.ggml.token_type", d.token_types);
  w.set_array_string("tokenizer.ggml.merges", d.merges);
}

// The error of loading a tokenizer from `fill`'s metadata; "" if it loaded.
std::string load_error(const std::function<void(GgufWriter&)>& fill) {
  MemGguf m = write_gguf(fill);
  if (!m.file) return "<gguf did not parse>";
  auto t = Tokenizer::from_gguf(*m.file);
  return t.ok() ? "" : t.message();
}

const text::VocabData kBase = tiny_bpe_data({"a b", "ab c"}, {{"<|im_end|>", TokenType::control}});

TEST(Metadata, LoadsFromGguf) {
  MemGguf m = write_gguf([](GgufWriter& w) {
    put_bpe(w, kBase);
    w.set_u32("tokenizer.ggml.eos_token_id", 258);
    w.set_bool("tokenizer.ggml.add_bos_token", false);
  });
  ASSERT_TRUE(m.file);
  auto t = Tokenizer::from_gguf(*m.file);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ((*t)->n_vocab(), 259);
  EXPECT_EQ((*t)->eos_id(), 258);
  EXPECT_EQ((*t)->pre_name(), "gpt-2");
  EXPECT_EQ((*t)->encode("abc<|im_end|>", false, true), (std::vector<int32_t>{257, 258}));
}

TEST(Metadata, MissingTokensArray) {
  const std::string e = load_error([](GgufWriter& w) {
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_array_string("tokenizer.ggml.merges", {"a b"});
  });
  EXPECT_NE(e.find("tokenizer.ggml.tokens"), std::string::npos) << e;
  EXPECT_NE(e.find("not found"), std::string::npos) << e;
}

TEST(Metadata, MissingModel) {
  const std::string e = load_error([](GgufWriter& w) {
    w.set_array_string("tokenizer.ggml.tokens", {"a", "b"});
  });
  EXPECT_NE(e.find("tokenizer.ggml.model"), std::string::npos) << e;
}

TEST(Metadata, TokensOfWrongType) {
  const std::string e = load_error([](GgufWriter& w) {
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_array_i32("tokenizer.ggml.tokens", {1, 2, 3});
  });
  EXPECT_NE(e.find("tokenizer.ggml.tokens"), std::string::npos) << e;
  EXPECT_NE(e.find("array of strings"), std::string::npos) << e;
}

TEST(Metadata, MergeReferencingUnknownToken) {
  const std::string e = load_error([](GgufWriter& w) {
    text::VocabData d = kBase;
    d.merges.push_back("ab zzz");
    put_bpe(w, d);
  });
  EXPECT_NE(e.find("tokenizer.ggml.merges[2]"), std::string::npos) << e;
  EXPECT_NE(e.find("'zzz'"), std::string::npos) << e;
}

TEST(Metadata, MalformedMerge) {
  const std::string e = load_error([](GgufWriter& w) {
    text::VocabData d = kBase;
    d.merges.push_back("abc");
    put_bpe(w, d);
  });
  EXPECT_NE(e.find("'left right'"), std::string::npos) << e;
}

TEST(Metadata, MissingMerges) {
  const std::string e = load_error([](GgufWriter& w) {
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_array_string("tokenizer.ggml.tokens", kBase.tokens);
  });
  EXPECT_NE(e.find("tokenizer.ggml.merges"), std::string::npos) << e;
}

TEST(Metadata, TokenTypeLengthMismatch) {
  const std::string e = load_error([](GgufWriter& w) {
    text::VocabData d = kBase;
    d.token_types.pop_back();
    put_bpe(w, d);
  });
  EXPECT_NE(e.find("tokenizer.ggml.token_type has 258 entries"), std::string::npos) << e;
}

TEST(Metadata, ScoresLengthMismatch) {
  const std::string e = load_error([](GgufWriter& w) {
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_array_string("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
    w.set_array_f32("tokenizer.ggml.scores", {0, 0});
  });
  EXPECT_NE(e.find("tokenizer.ggml.scores has 2 entries"), std::string::npos) << e;
}

TEST(Metadata, DuplicateToken) {
  text::VocabData d = kBase;
  d.tokens.push_back("ab");
  d.token_types.push_back(1);
  auto t = Tokenizer::from_data(std::move(d));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("duplicates token 256"), std::string::npos) << t.message();
}

TEST(Metadata, UnknownModelAndPre) {
  std::string e = load_error([](GgufWriter& w) {
    text::VocabData d = kBase;
    d.model = "t5";
    put_bpe(w, d);
  });
  EXPECT_NE(e.find("unsupported tokenizer.ggml.model 't5'"), std::string::npos) << e;
  e = load_error([](GgufWriter& w) {
    text::VocabData d = kBase;
    d.pre = "martian";
    put_bpe(w, d);
  });
  EXPECT_NE(e.find("unknown pre-tokenizer 'martian'"), std::string::npos) << e;
}

TEST(Metadata, EmptyVocab) {
  text::VocabData d;
  d.model = "llama";
  auto t = Tokenizer::from_data(std::move(d));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("tokenizer.ggml.tokens is missing or empty"), std::string::npos);
}

TEST(Metadata, FixtureModelTokenizersLoad) {
  STRATA_REQUIRE_FIXTURES(dir);
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/models")) {
    if (e.path().extension() != ".gguf") continue;
    const std::string path = e.path().string();
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    auto t = Tokenizer::from_gguf(**f);
    ASSERT_TRUE(t.ok()) << path << ": " << t.message();
    const Tokenizer& tok = **t;
    ++n;
    EXPECT_EQ(tok.n_vocab(), 512) << path;
    EXPECT_EQ(tok.model_name(), "gpt2");
    EXPECT_EQ(tok.pre_name(), (*f)->get_string("tokenizer.ggml.pre").value()) << path;
    EXPECT_FALSE(tok.add_bos()) << path;
    EXPECT_EQ(tok.token_text(509), "<|endoftext|>");
    EXPECT_EQ(tok.find_token("<|im_start|>"), 510);
    EXPECT_TRUE(tok.is_eog(509) && tok.is_eog(511)) << path;
    EXPECT_FALSE(tok.is_eog(510)) << path;
    EXPECT_EQ(tok.encode("<|im_start|>user\nhi<|im_end|>", false, true).front(), 510);
    EXPECT_EQ(tok.encode("<|im_start|>user\nhi<|im_end|>", false, true).back(), 511);
    const std::string s = "Hello, world! 123 \xc3\xa9t\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd\n\tx";
    const std::vector<int32_t> ids = tok.encode(s, true, false);
    for (int32_t id : ids) EXPECT_TRUE(id >= 0 && id < 509) << path << " id " << id;
    EXPECT_EQ(tok.decode(ids), s) << path;
  }
  EXPECT_EQ(n, 13u);
}

}  // namespace
}  // namespace strata
