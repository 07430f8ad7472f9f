// The KV memory bill (src/memory/kv_bill.h) against deepseek-v4.md §5's accounting for
// V4-Flash, a classic GQA model, the tiny deepseek4 fixture GGUF, and bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/fixtures.h"
#include "format/gguf.h"
#include "memory/plan/kv_bill.h"

namespace strata {
namespace {

std::string flash_config() {
  return testing::source_dir() + "/tests/data/deepseek-v4-flash.config.json";
}

const KvBillLine* line(const KvBill& b, const std::string& name) {
  for (const auto& l : b.lines)
    if (l.name == name) return &l;
  return nullptr;
}

TEST(Ds4KvBill, V4FlashMatchesTheDocsAccounting) {
  auto spec = kv_spec_from_hf_config(flash_config());
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->family, KvFamily::deepseek4);
  EXPECT_EQ(spec->n_layer, 43);  // the MTP layer (44th ratio) is not a main layer
  const KvBill b = kv_bill_make(*spec);
  // §5.1: 21 CSA + 20 HCA layers; 5.406 rows of 512 and 5.25 rows of 128 per token
  ASSERT_NE(line(b, "csa"), nullptr);
  EXPECT_EQ(line(b, "csa")->n_layers, 21);
  EXPECT_EQ(line(b, "hca")->n_layers, 20);
  EXPECT_EQ(line(b, "indexer")->n_layers, 21);
  EXPECT_DOUBLE_EQ(line(b, "csa")->bytes_per_token(KvType::bf16), 21 * 1024 / 4.0);
  EXPECT_DOUBLE_EQ(line(b, "hca")->bytes_per_token(KvType::bf16), 20 * 1024 / 128.0);
  EXPECT_DOUBLE_EQ(line(b, "indexer")->bytes_per_token(KvType::bf16), 21 * 256 / 4.0);
  EXPECT_DOUBLE_EQ(b.bytes_per_token(KvType::bf16), 6880.0);  // doc: "6880 B/token"
  EXPECT_DOUBLE_EQ(b.bytes_per_token(KvType::f16), 6880.0);
  EXPECT_DOUBLE_EQ(b.bytes_per_token(KvType::q8_0), 3655.0);  // doc: "≈ 3655 B/token"
  EXPECT_DOUBLE_EQ(b.bytes_per_token(KvType::f32), 13760.0);
  // fixed: window ring 43 x 128 x 1024 B at bf16 (doc: 5.4 MiB); states 11.6 MiB f32 at any type
  EXPECT_EQ(line(b, "window")->bytes(KvType::bf16, 1 << 20), 43ull * 128 * 1024);
  const uint64_t states = 21ull * 64 * 1024 + 21ull * 16 * 1024 + 20ull * 512 * 1024;
  EXPECT_EQ(b.fixed_bytes(KvType::bf16), 43ull * 128 * 1024 + states);
  EXPECT_EQ(b.fixed_bytes(KvType::mxfp4) - states, 43ull * 128 * 17 * 16);
  // at 1M context: 6880 B/token + fixed (≈ 6.9 GB, doc §5.1)
  EXPECT_EQ(b.total_bytes(KvType::bf16, 1 << 20), 6880ull * (1 << 20) + b.fixed_bytes(KvType::bf16));
  // short context: the window is capped at the context, compressor state is not
  EXPECT_EQ(line(b, "window")->rows(100), 100);
  EXPECT_EQ(line(b, "hca_state")->rows(100), 128);
  EXPECT_EQ(line(b, "hca")->rows(129), 2);  // allocation: ceil
}

TEST(Ds4KvBill, ClassicGqaWithSlidingLayers) {
  const char* cfg = R"({"model_type": "gpt_oss", "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 64, "hidden_size": 512, "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    "max_position_embeddings": 4096})";
  auto spec = kv_spec_from_hf_config_text(cfg, "inline");
  ASSERT_TRUE(spec.ok()) << spec.message();
  const KvBill b = kv_bill_make(*spec);
  // 2 full layers x 2 (K,V) x 2 heads x 64 x 2 B
  EXPECT_DOUBLE_EQ(b.bytes_per_token(KvType::f16), 2.0 * 2 * 2 * 64 * 2);
  EXPECT_EQ(b.fixed_bytes(KvType::f16), 2ull * 128 * 2 * 2 * 64 * 2);
  EXPECT_EQ(b.total_bytes(KvType::f16, 64), 64ull * 2 * 2 * 2 * 64 * 2 * 2);  // window capped at ctx
  // no sliding window: every layer grows
  auto dense = kv_spec_from_hf_config_text(
      R"({"num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128})",
      "qwen3");
  ASSERT_TRUE(dense.ok()) << dense.message();
  EXPECT_DOUBLE_EQ(kv_bill_make(*dense).bytes_per_token(KvType::bf16), 48.0 * 2 * 4 * 128 * 2);
  // MLA (DeepSeek-V3 style): one latent of kv_lora_rank + rope per token and layer
  auto mla = kv_spec_from_hf_config_text(
      R"({"num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "num_attention_heads": 128})",
      "v3");
  ASSERT_TRUE(mla.ok()) << mla.message();
  EXPECT_DOUBLE_EQ(kv_bill_make(*mla).bytes_per_token(KvType::bf16), 61.0 * 576 * 2);
}

TEST(Ds4KvBill, BadConfigsNameTheProblem) {
  auto r = kv_spec_from_hf_config_text("{nope", "x.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("x.json"), std::string::npos);
  r = kv_spec_from_hf_config_text(
      R"({"num_hidden_layers": 3, "head_dim": 64, "index_head_dim": 64, "sliding_window": 8,
          "compress_ratios": [0, 4, 16]})",
      "c.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("compress_ratios[2] = 16"), std::string::npos) << r.message();
  r = kv_spec_from_hf_config_text(
      R"({"num_hidden_layers": 3, "head_dim": 64, "index_head_dim": 64, "sliding_window": 8,
          "compress_ratios": [0, 4]})",
      "c.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("compress_ratios"), std::string::npos) << r.message();
  r = kv_spec_from_hf_config_text(
      R"({"num_hidden_layers": 3, "compress_ratios": [0, 4, 128], "sliding_window": 8})", "c.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("head_dim"), std::string::npos) << r.message();
  EXPECT_FALSE(kv_spec_from_hf_config("/nonexistent/config.json").ok());
}

TEST(Ds4KvBill, GgufMetadataOfADeepseek4File) {
  namespace fs = std::filesystem;
  const fs::path p = fs::temp_directory_path() / ("ds4_kv_bill_" + std::to_string(getpid()) + ".gguf");
  GgufWriter w;
  w.set_string("general.architecture", "deepseek4");
  w.set_u32("deepseek4.block_count", 4);
  w.set_u32("deepseek4.context_length", 8192);
  w.set_u32("deepseek4.attention.key_length", 64);
  w.set_u32("deepseek4.attention.indexer.key_length", 64);
  w.set_u32("deepseek4.attention.sliding_window", 16);
  w.set_array_u32("deepseek4.attention.compress_ratios", {0, 4, 128, 4});
  ASSERT_TRUE(w.write(p.string()).ok());
  auto f = GgufFile::open(p.string());
  ASSERT_TRUE(f.ok()) << f.message();
  auto spec = kv_spec_from_gguf(**f);
  ASSERT_TRUE(spec.ok()) << spec.message();
  const KvBill b = kv_bill_make(*spec);
  EXPECT_DOUBLE_EQ(b.bytes_per_token(KvType::f32), 2 * 64 * 4 / 4.0 + 64 * 4 / 128.0 + 2 * 64 * 4 / 4.0);
  // a ratio llama.cpp rejects
  GgufWriter bad = w;
  bad.set_array_u32("deepseek4.attention.compress_ratios", {0, 4, 64, 4});
  ASSERT_TRUE(bad.write(p.string()).ok());
  f = GgufFile::open(p.string());
  ASSERT_TRUE(f.ok());
  auto r = kv_spec_from_gguf(**f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("deepseek4.attention.compress_ratios[2] = 64"), std::string::npos)
      << r.message();
  // too short for block_count
  bad.set_array_u32("deepseek4.attention.compress_ratios", {0, 4});
  ASSERT_TRUE(bad.write(p.string()).ok());
  f = GgufFile::open(p.string());
  r = kv_spec_from_gguf(**f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("expected >= 4"), std::string::npos) << r.message();
  fs::remove(p);
}

TEST(Ds4KvBill, TinyDeepseek4Fixture) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto f = GgufFile::open(dir + "/models/tiny-deepseek4-f32.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  auto spec = kv_spec_from_gguf(**f);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->compress_ratios, (std::vector<int>{0, 0, 4, 128, 4, 128}));
  EXPECT_EQ(spec->head_dim, 64);
  EXPECT_EQ(spec->indexer_head_dim, 64);
  EXPECT_EQ(spec->n_swa, 128);
}

}  // namespace
}  // namespace strata
