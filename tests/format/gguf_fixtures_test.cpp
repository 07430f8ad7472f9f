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

// Facts checked independently with llama.cpp's gguf-py reader.
struct ModelFacts {
  const char* file;
  const char* arch;
  size_t n_tensors;
  GgmlType up_type;    // blk.0.ffn_up_exps.weight
  int64_t up_ne1;      // expert ffn width
  GgmlType embd_type;  // token_embd.weight [64, 512]
};

TEST(GgufFixtures, EveryModelsArchTensorCountAndShapes) {
  STRATA_REQUIRE_FIXTURES(dir);
  const ModelFacts facts[] = {
      {"tiny-deepseek4-MXFP4_MOE", "deepseek4", 178, GgmlType::mxfp4, 32, GgmlType::q8_0},
      {"tiny-deepseek4-f32", "deepseek4", 178, GgmlType::f32, 32, GgmlType::f32},
      {"tiny-gpt-oss-MXFP4", "gpt-oss", 79, GgmlType::mxfp4, 32, GgmlType::f32},
      {"tiny-gpt-oss-MXFP4_MOE", "gpt-oss", 79, GgmlType::mxfp4, 32, GgmlType::q8_0},
      {"tiny-gpt-oss-f32", "gpt-oss", 79, GgmlType::f32, 32, GgmlType::f32},
      {"tiny-llama-moe-Q4_0", "llama", 23, GgmlType::q4_0, 128, GgmlType::q4_0},
      {"tiny-llama-moe-Q8_0", "llama", 23, GgmlType::q8_0, 128, GgmlType::q8_0},
      {"tiny-llama-moe-f32", "llama", 23, GgmlType::f32, 128, GgmlType::f32},
      {"tiny-qwen2moe-Q8_0", "qwen2moe", 37, GgmlType::q8_0, 32, GgmlType::q8_0},
      {"tiny-qwen2moe-f32", "qwen2moe", 37, GgmlType::f32, 32, GgmlType::f32},
      {"tiny-qwen3moe-Q4_0", "qwen3moe", 27, GgmlType::q4_0, 128, GgmlType::q4_0},
      {"tiny-qwen3moe-Q8_0", "qwen3moe", 27, GgmlType::q8_0, 128, GgmlType::q8_0},
      {"tiny-qwen3moe-f32", "qwen3moe", 27, GgmlType::f32, 128, GgmlType::f32},
  };
  for (const ModelFacts& m : facts) {
    SCOPED_TRACE(m.file);
    auto f = GgufFile::open(dir + "/models/" + m.file + ".gguf");
    ASSERT_TRUE(f.ok()) << f.message();
    const GgufFile& g = **f;
    EXPECT_EQ(g.version(), 3u);
    EXPECT_EQ(ok_or(g.get_string("general.architecture")), m.arch);
    EXPECT_EQ(g.tensors().size(), m.n_tensors);
    const TensorView* up = g.find_tensor("blk.0.ffn_up_exps.weight");
    ASSERT_NE(up, nullptr);
    EXPECT_EQ(up->type, m.up_type);
    EXPECT_EQ(up->n_dims, 3);
    EXPECT_EQ(up->ne[0], 64);
    EXPECT_EQ(up->ne[1], m.up_ne1);
    EXPECT_EQ(up->ne[2], 8);
    EXPECT_EQ(up->nbytes, row_bytes(m.up_type, 64) * static_cast<size_t>(m.up_ne1) * 8);
    EXPECT_EQ(up->slice2d(7).nbytes, up->nbytes / 8);
    const TensorView* embd = g.find_tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->shape_string(), std::string(type_name(m.embd_type)) + " [64, 512]");
    EXPECT_EQ(embd->row_size(), row_bytes(m.embd_type, 64));
    // Views are laid out back to back, each at an aligned offset from the data section.
    for (const TensorView& t : g.tensors()) {
      const size_t off = static_cast<size_t>(static_cast<const uint8_t*>(t.data) -
                                             static_cast<const uint8_t*>(g.tensors()[0].data)) +
                         g.data_offset();
      EXPECT_EQ(off % g.alignment(), 0u) << t.name;
      EXPECT_LE(off + t.nbytes, g.file_size()) << t.name;
    }
  }
  auto ds4 = GgufFile::open(dir + "/models/tiny-deepseek4-f32.gguf");
  ASSERT_TRUE(ds4.ok());
  const TensorView* tid = (*ds4)->find_tensor("blk.0.ffn_gate_tid2eid.weight");
  ASSERT_NE(tid, nullptr);
  EXPECT_EQ(tid->shape_string(), "i32 [4, 512]");
  auto clamp = (*ds4)->get_float_array("deepseek4.swiglu_clamp_exp");
  ASSERT_TRUE(clamp.ok()) << clamp.message();
  ASSERT_EQ(clamp->size(), 6u);
  EXPECT_EQ((*clamp)[0], 4.0f);
}

}  // namespace
}  // namespace strata
