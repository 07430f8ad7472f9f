// The KV memory bill (src/plan/kv_bill.h) against deepseek-v4.md §5's accounting for
// V4-Flash, a classic GQA model, the tiny deepseek4 fixture GGUF, and bad input. The doc counts
// a window ring of `window` rows (token by token: steps of 1); strata's rings also hold a step's
// other tokens (window - 1 + n_batch rows).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/fixtures.h"
#include "format/gguf.h"
#include "model/arch.h"
#include "model/model.h"
#include "plan/kv_bill.h"
#include "plan/planner.h"

namespace strata {
namespace {

std::string flash_config() {
  return testing::source_dir() + "/tests/data/deepseek-v4-flash.config.json";
}

const KvBillLine* line(const KvBill& b, const std::string& name) {
  for (const auto& l : b.lines)
    if (l.name() == name) return &l;
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
  const int64_t M = 1 << 20;
  EXPECT_EQ(line(b, "window")->bytes(KvType::bf16, M, 1), 43ull * 128 * 1024);
  const uint64_t states = 21ull * 64 * 1024 + 21ull * 16 * 1024 + 20ull * 512 * 1024;
  EXPECT_EQ(b.fixed_bytes(KvType::bf16, M, 1), 43ull * 128 * 1024 + states);
  EXPECT_EQ(b.fixed_bytes(KvType::mxfp4, M, 1) - states, 43ull * 128 * 17 * 16);
  // at 1M context: 6880 B/token + fixed (≈ 6.9 GB, doc §5.1)
  EXPECT_EQ(b.total_bytes(KvType::bf16, M, 1), 6880ull * M + b.fixed_bytes(KvType::bf16, M, 1));
  // steps of 512 tokens: the ring holds 127 + 512 rows
  EXPECT_EQ(line(b, "window")->rows(M, 512), 639);
  EXPECT_EQ(b.fixed_bytes(KvType::bf16, M, 512), 43ull * 639 * 1024 + states);
  // short context: the window is capped at the context, compressor state is not
  EXPECT_EQ(line(b, "window")->rows(100, 512), 100);
  EXPECT_EQ(line(b, "hca_state")->rows(100, 512), 128);
  EXPECT_EQ(line(b, "hca")->rows(129, 512), 2);  // allocation: ceil
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
  EXPECT_EQ(b.fixed_bytes(KvType::f16, 4096, 1), 2ull * 128 * 2 * 2 * 64 * 2);
  EXPECT_EQ(b.fixed_bytes(KvType::f16, 4096, 64), 2ull * 191 * 2 * 2 * 64 * 2);
  EXPECT_EQ(b.total_bytes(KvType::f16, 64, 16), 64ull * 2 * 2 * 2 * 64 * 2 * 2);  // window capped at ctx
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

// A deepseek4 GGUF is priced by the architecture's own reader: its errors name the key.
TEST(Ds4KvBill, GgufMetadataOfADeepseek4File) {
  STRATA_REQUIRE_FIXTURES(dir);
  namespace fs = std::filesystem;
  auto src = GgufFile::open(dir + "/models/tiny-deepseek4-f32.gguf");
  ASSERT_TRUE(src.ok()) << src.message();
  GgufWriter w;  // the fixture's metadata, no tensors
  for (const GgufKv& kv : (*src)->metadata()) w.set_value(kv.key, kv.value);
  const fs::path p = fs::temp_directory_path() / ("ds4_kv_bill_" + std::to_string(getpid()) + ".gguf");
  w.set_array_u32("deepseek4.attention.compress_ratios", {0, 4, 128, 4, 0, 0});
  ASSERT_TRUE(w.write(p.string()).ok());
  auto f = GgufFile::open(p.string());
  ASSERT_TRUE(f.ok()) << f.message();
  auto spec = kv_spec_from_gguf(**f);
  ASSERT_TRUE(spec.ok()) << spec.message();
  const KvBill b = kv_bill_make(*spec);
  EXPECT_DOUBLE_EQ(b.bytes_per_token(KvType::f32), 2 * 64 * 4 / 4.0 + 64 * 4 / 128.0 + 2 * 64 * 4 / 4.0);
  // a ratio llama.cpp rejects
  GgufWriter bad = w;
  bad.set_array_u32("deepseek4.attention.compress_ratios", {0, 4, 64, 4, 0, 0});
  ASSERT_TRUE(bad.write(p.string()).ok());
  f = GgufFile::open(p.string());
  ASSERT_TRUE(f.ok());
  auto r = kv_spec_from_gguf(**f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("deepseek4.attention.compress_ratios'[2] = 64"), std::string::npos)
      << r.message();
  // too short for block_count
  bad.set_array_u32("deepseek4.attention.compress_ratios", {0, 4});
  ASSERT_TRUE(bad.write(p.string()).ok());
  f = GgufFile::open(p.string());
  ASSERT_TRUE(f.ok());
  r = kv_spec_from_gguf(**f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("expected >= 6"), std::string::npos) << r.message();
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

bool same_spec(const KvSpec& a, const KvSpec& b) {
  if (a.n_layer() != b.n_layer()) return false;
  for (int il = 0; il < a.n_layer(); ++il) {
    const auto& pa = a.layers[il].parts;
    const auto& pb = b.layers[il].parts;
    if (pa.size() != pb.size()) return false;
    for (size_t i = 0; i < pa.size(); ++i)
      if (pa[i].kind != pb[i].kind || pa[i].name != pb[i].name || pa[i].width != pb[i].width ||
          pa[i].ratio != pb[i].ratio || pa[i].window != pb[i].window || pa[i].state_rows != pb[i].state_rows)
        return false;
  }
  return true;
}

// The bill of every fixture architecture is the loaded model's own spec, and a session allocates
// exactly what the bill says, at contexts and step sizes around the windows and ratios.
TEST(KvBill, PricesWhatEverySessionAllocates) {
  STRATA_REQUIRE_FIXTURES(dir);
  for (const char* name : {"tiny-llama-moe-f32", "tiny-qwen3moe-f32", "tiny-qwen2moe-f32", "tiny-gpt-oss-f32",
                           "tiny-deepseek4-f32"}) {
    const std::string path = dir + "/models/" + name + ".gguf";
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    auto spec = kv_spec_from_gguf(**f);
    ASSERT_TRUE(spec.ok()) << name << ": " << spec.message();
    auto m = Model::load(path, {});
    ASSERT_TRUE(m.ok()) << m.message();
    const Architecture& arch = (*m)->arch();
    EXPECT_TRUE(same_spec(spec->kv, arch.kv_spec())) << name;
    const KvBill bill = kv_bill_make(*spec);
    for (int n_ctx : {1, 7, 129, 300})
      for (int n_batch : {1, 16, 512}) {
        StateOptions o;
        o.n_ctx = n_ctx;
        o.n_batch = n_batch;
        o.device = &(*m)->device();
        auto st = arch.new_state(o);
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_EQ((*st)->memory().kv_cache, bill.total_bytes(KvType::f32, n_ctx, n_batch))
            << name << " n_ctx " << n_ctx << " n_batch " << n_batch;
        EXPECT_EQ((*st)->memory().kv_cache, arch.kv_spec().bytes(n_ctx, n_batch)) << name;
        // the plan's scratch is the session's (its architecture's sizing), shared by the other
        // sequences' sessions, plus one logits row
        auto sess = (*m)->new_session({.n_ctx = n_ctx, .n_batch = n_batch});
        ASSERT_TRUE(sess.ok()) << sess.message();
        auto s2 = (*m)->new_session({.n_ctx = n_ctx, .n_batch = n_batch, .share_scratch = sess->get()});
        ASSERT_TRUE(s2.ok()) << s2.message();
        EXPECT_EQ((*s2)->memory().scratch, 0u);
        EXPECT_EQ((*s2)->memory().kv_cache, (*sess)->memory().kv_cache);
        auto pm = plan_model_from_gguf(**f);
        ASSERT_TRUE(pm.ok()) << pm.message();
        PlanOptions po;
        po.n_ctx = n_ctx;
        po.n_ubatch = n_batch;
        po.n_threads = (*m)->pool().size();
        po.n_seq = 3;
        auto pb = plan_make(*pm, po);
        ASSERT_TRUE(pb.ok()) << pb.message();
        EXPECT_EQ(pb->scratch, (*sess)->memory().scratch + 4 * static_cast<uint64_t>((*m)->n_vocab()))
            << name << " n_ctx " << n_ctx << " n_batch " << n_batch;
        EXPECT_EQ(pb->kv_cache, 3 * (*sess)->memory().kv_cache) << name;
      }
  }
}

}  // namespace
}  // namespace strata
