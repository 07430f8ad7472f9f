// Parse every fixture GGUF (models + tokenizer vocabularies) and check known facts.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/fixtures.h"
#include "format/gguf.h"

namespace strata {
namespace {

template <class T>
T ok_or(Result<T> r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
  return r.ok() ? std::move(r).value() : T{};
}

std::vector<std::string> gguf_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".gguf") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufFixtures, ParsesAllModelsAndVocabs) {
  STRATA_REQUIRE_FIXTURES(dir);
  size_t n = 0;
  for (const char* sub : {"/models", "/vocab"}) {
    for (const std::string& path : gguf_files(dir + sub)) {
      auto f = GgufFile::open(path);
      ASSERT_TRUE(f.ok()) << f.message();
      EXPECT_GE((*f)->version(), 2u);
      EXPECT_TRUE((*f)->get_string("general.architecture").ok()) << path;
      for (const TensorView& t : (*f)->tensors()) {
        EXPECT_EQ((*f)->find_tensor(t.name), &t);
      }
      for (const GgufKv& kv : (*f)->metadata()) EXPECT_EQ((*f)->find(kv.key), &kv.value);
      ++n;
    }
  }
  EXPECT_EQ(n, 18u);
}

TEST(GgufFixtures, Qwen3MoeFacts) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto f = GgufFile::open(dir + "/models/tiny-qwen3moe-f32.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  const GgufFile& g = **f;
  EXPECT_EQ(ok_or(g.get_string("general.architecture")), "qwen3moe");
  EXPECT_EQ(ok_or(g.get_int("qwen3moe.block_count")), 2);
  EXPECT_EQ(ok_or(g.get_int("qwen3moe.embedding_length")), 64);
  EXPECT_EQ(ok_or(g.get_int("qwen3moe.expert_count")), 8);
  EXPECT_EQ(ok_or(g.get_int("qwen3moe.expert_used_count")), 2);
  EXPECT_NEAR(ok_or(g.get_float("qwen3moe.rope.freq_base")), 1e6, 1);
  auto tokens = g.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.message();
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[509], "<|endoftext|>");
  const TensorView* up = g.find_tensor("blk.0.ffn_up_exps.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->type, GgmlType::f32);
  EXPECT_EQ(up->n_dims, 3);
  EXPECT_EQ(up->ne[0], 64);
  EXPECT_EQ(up->ne[1], 128);
  EXPECT_EQ(up->ne[2], 8);
  EXPECT_EQ(up->nbytes, 64u * 128 * 8 * 4);
  EXPECT_EQ(g.data_offset() % g.alignment(), 0u);
}

}  // namespace
}  // namespace strata
