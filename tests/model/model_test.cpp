// Model / Session behaviour that the fixtures do not cover: bad input gets clear errors (token
// ids, context overflow, missing / misshapen tensors, missing metadata, unknown architecture),
// chunked evaluation equals one batch, reset(), last-row logits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "format/gguf.h"
#include "model/arch.h"
#include "model/hparams.h"
#include "model/model.h"

namespace strata {
namespace {

std::string model_path(const std::string& dir, const char* name) {
  return dir + "/models/" + name + ".gguf";
}

std::unique_ptr<Model> load_ok(const std::string& path) {
  LoadOptions lo;
  lo.n_threads = 1;
  auto m = Model::load(path, lo);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.message());
  return m.ok() ? std::move(m).value() : nullptr;
}

// Rewrites `src` into a temp file with `edit` applied to each tensor (name, ne; return false to
// drop it) and `edit_kv` to the metadata (return false to drop a key).
struct Rewrite {
  std::function<bool(const std::string&, std::vector<int64_t>&)> edit = [](auto&, auto&) { return true; };
  std::function<bool(const std::string&)> keep_kv = [](const std::string&) { return true; };
  std::function<void(GgufWriter&)> extra = [](GgufWriter&) {};
};

std::string rewrite(const std::string& src, const Rewrite& r, const char* tag) {
  auto f = GgufFile::open(src);
  EXPECT_TRUE(f.ok());
  GgufWriter w;
  for (const GgufKv& kv : f.value()->metadata()) {
    if (kv.key == "general.alignment" || !r.keep_kv(kv.key)) continue;
    w.set_value(kv.key, kv.value);
  }
  r.extra(w);
  for (const TensorView& t : f.value()->tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + std::max(1, t.n_dims));
    if (!r.edit(t.name, ne)) continue;
    Status s = w.add_tensor(t.name, t.type, ne, t.data);  // shrinking shapes read a prefix of the data
    EXPECT_TRUE(s.ok()) << s.message();
  }
  const std::string out =
      (std::filesystem::temp_directory_path() /
       ("strata_model_test_" + std::string(tag) + "_" + std::to_string(::getpid()) + ".gguf"))
          .string();
  Status s = w.write(out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

TEST(ModelErrors, TokenOutOfRange) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto m = load_ok(model_path(dir, "tiny-qwen3moe-f32"));
  ASSERT_TRUE(m);
  auto s = m->new_session({.n_ctx = 32}).value();
  std::vector<float> logits(4 * m->n_vocab());
  std::vector<int32_t> toks = {1, 2, 512, 3};
  Status st = s->eval(toks, logits.data(), true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("token id 512 at position 2"), std::string::npos) << st.message();
  EXPECT_EQ(s->n_past(), 0);
  toks = {-1};
  st = s->eval(toks, logits.data(), true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("-1"), std::string::npos) << st.message();
}

TEST(ModelErrors, ContextExceeded) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto m = load_ok(model_path(dir, "tiny-llama-moe-f32"));
  ASSERT_TRUE(m);
  auto s = m->new_session({.n_ctx = 8}).value();
  std::vector<float> logits(9 * m->n_vocab());
  std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(s->eval(toks, logits.data(), true).ok());
  Status st = s->eval(toks, logits.data(), true);  // 6 + 6 > 8
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("n_ctx 8"), std::string::npos) << st.message();
  EXPECT_EQ(s->n_past(), 6);  // nothing appended
  std::vector<int32_t> two = {7, 8};
  EXPECT_TRUE(s->eval(two, logits.data(), false).ok());
  EXPECT_EQ(s->n_past(), 8);
  std::vector<int32_t> empty;
  EXPECT_FALSE(s->eval(empty, logits.data(), false).ok());
}

TEST(ModelErrors, MissingTensor) {
  STRATA_REQUIRE_FIXTURES(dir);
  Rewrite r;
  r.edit = [](const std::string& n, std::vector<int64_t>&) { return n != "blk.1.attn_k.weight"; };
  const std::string p = rewrite(model_path(dir, "tiny-qwen3moe-f32"), r, "missing");
  auto m = Model::load(p, {});
  std::filesystem::remove(p);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("tensor 'blk.1.attn_k.weight': missing"), std::string::npos) << m.message();
}

TEST(ModelErrors, WrongShape) {
  STRATA_REQUIRE_FIXTURES(dir);
  Rewrite r;
  r.edit = [](const std::string& n, std::vector<int64_t>& ne) {
    if (n == "blk.1.ffn_up_exps.weight") ne[2] = 4;
    return true;
  };
  const std::string p = rewrite(model_path(dir, "tiny-qwen3moe-f32"), r, "shape");
  auto m = Model::load(p, {});
  std::filesystem::remove(p);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(
      m.message().find("tensor 'blk.1.ffn_up_exps.weight': expected shape [64, 128, 8], got [64, 128, 4]"),
      std::string::npos)
      << m.message();
}

TEST(ModelErrors, MissingMetadataKey) {
  STRATA_REQUIRE_FIXTURES(dir);
  Rewrite r;
  r.keep_kv = [](const std::string& k) { return k != "qwen2moe.attention.head_count"; };
  const std::string p = rewrite(model_path(dir, "tiny-qwen2moe-f32"), r, "key");
  auto m = Model::load(p, {});
  std::filesystem::remove(p);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("qwen2moe.attention.head_count"), std::string::npos) << m.message();
}

TEST(ModelErrors, PerLayerHeadCountKv) {
  STRATA_REQUIRE_FIXTURES(dir);
  const std::string src = model_path(dir, "tiny-qwen3moe-f32");
  Rewrite r;
  r.keep_kv = [](const std::string& k) { return k != "qwen3moe.attention.head_count_kv"; };
  r.extra = [](GgufWriter& w) { w.set_array_i32("qwen3moe.attention.head_count_kv", {2, 2}); };
  const std::string ok_path = rewrite(src, r, "kvarr");
  auto a = load_ok(src);
  auto b = load_ok(ok_path);
  std::filesystem::remove(ok_path);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->hparams().layers[1].n_head_kv, 2);
  std::vector<int32_t> toks = {5, 77, 300, 2};
  std::vector<float> la(4 * 512), lb(4 * 512);
  ASSERT_TRUE(a->new_session({.n_ctx = 8}).value()->eval(toks, la.data(), true).ok());
  ASSERT_TRUE(b->new_session({.n_ctx = 8}).value()->eval(toks, lb.data(), true).ok());
  EXPECT_EQ(la, lb);
  // A wrong count per layer is an error that names the key.
  r.extra = [](GgufWriter& w) { w.set_array_i32("qwen3moe.attention.head_count_kv", {2, 2, 2}); };
  const std::string bad = rewrite(src, r, "kvarr_bad");
  auto m = Model::load(bad, {});
  std::filesystem::remove(bad);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("attention.head_count_kv"), std::string::npos) << m.message();
}

TEST(ModelErrors, UnknownArchitecture) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto f = GgufFile::open(model_path(dir, "tiny-qwen3moe-f32"));
  ASSERT_TRUE(f.ok());
  GgufWriter w;
  for (const GgufKv& kv : f.value()->metadata())
    if (kv.key != "general.alignment" && kv.key != "general.architecture") w.set_value(kv.key, kv.value);
  w.set_string("general.architecture", "mamba9");
  const std::string p = (std::filesystem::temp_directory_path() /
                         ("strata_model_test_arch_" + std::to_string(::getpid()) + ".gguf"))
                            .string();
  ASSERT_TRUE(w.write(p).ok());
  auto m = Model::load(p, {});
  std::filesystem::remove(p);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("'mamba9' is not supported"), std::string::npos) << m.message();
  EXPECT_FALSE(Model::load("/nonexistent/model.gguf", {}).ok());
}

TEST(ModelSession, ChunkedEqualsBatchAndResetRepeats) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto m = load_ok(model_path(dir, "tiny-gpt-oss-f32"));
  ASSERT_TRUE(m);
  const int V = m->n_vocab();
  std::vector<int32_t> toks;
  for (int i = 0; i < 150; ++i) toks.push_back((i * 37 + 11) % 509);
  std::vector<float> a(toks.size() * V), b(toks.size() * V), last(V);
  auto s1 = m->new_session({.n_ctx = 160}).value();
  ASSERT_TRUE(s1->eval(toks, a.data(), true).ok());
  // n_batch 7 splits the input into chunks (and makes the window layers use a ring).
  auto s2 = m->new_session({.n_ctx = 160, .n_batch = 7}).value();
  ASSERT_TRUE(s2->eval(toks, b.data(), true).ok());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << "at " << i;
  // Last-row logits after a reset equal the last row of the batch.
  s2->reset();
  EXPECT_EQ(s2->n_past(), 0);
  ASSERT_TRUE(s2->eval(toks, last.data(), false).ok());
  for (int v = 0; v < V; ++v) ASSERT_NEAR(last[v], a[(toks.size() - 1) * V + v], 1e-5);
}

TEST(ModelSession, HparamsAndRegistry) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto m = load_ok(model_path(dir, "tiny-gpt-oss-f32"));
  ASSERT_TRUE(m);
  const HParams& hp = m->hparams();
  EXPECT_EQ(m->arch_name(), "gpt-oss");
  EXPECT_EQ(hp.n_layer, 4);
  EXPECT_EQ(hp.head_dim_k, 16);
  EXPECT_EQ(hp.layers[0].attn_kind, AttnKind::attn_kind_sliding);
  EXPECT_EQ(hp.layers[0].window, 128);
  EXPECT_EQ(hp.layers[1].attn_kind, AttnKind::attn_kind_full);
  EXPECT_NEAR(hp.rope.freq_scale, 1.0f / 32.0f, 1e-9);
  EXPECT_EQ(m->n_vocab(), 512);
  for (const char* a : {"qwen3moe", "llama", "qwen2moe", "gpt-oss", "deepseek4"})
    EXPECT_NE(arch_find(a), nullptr) << a;
  EXPECT_EQ(arch_find("nope"), nullptr);
  EXPECT_EQ(arch_find("deepseek_v41"), nullptr);  // not a GGUF architecture
  EXPECT_NE(arch_find("deepseek_v41", ArchSource::checkpoint_dir), nullptr);
}

// Checkpoint directories go through the registry: config.json picks the entry; one naming no
// known architecture, or not JSON, is a clear error.
TEST(ModelSession, CheckpointDirectoryRegistry) {
  const auto dir = std::filesystem::path(testing::binary_dir()) / "ckpt_dir_registry";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& text) { std::ofstream(dir / "config.json") << text; };
  write(R"({"model_type": "mamba", "hidden_size": 8})");
  auto m = Model::load(dir.string(), {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("names no architecture"), std::string::npos) << m.message();
  EXPECT_NE(m.message().find("model_type 'mamba'"), std::string::npos) << m.message();
  EXPECT_NE(m.message().find("deepseek_v41"), std::string::npos) << m.message();
  write("[1, 2");
  m = Model::load(dir.string(), {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("not a JSON object"), std::string::npos) << m.message();
  write(R"({"model_type": "deepseek_v41"})");  // found, then its own loader names what is missing
  m = Model::load(dir.string(), {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("config.json"), std::string::npos) << m.message();
  const auto v = arch_find_config_text(R"({"kv_source_layers": [1]})", "x");
  ASSERT_TRUE(v.ok());
  EXPECT_STREQ(v.value()->name, "deepseek_v41");
}

TEST(ModelSession, DeepseekV41ThroughModelLoad) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  auto m = Model::load(root + "/sparse", {});
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ((*m)->arch_name(), "deepseek_v41");
  EXPECT_FALSE((*m)->has_gguf());
  // The expert store serves a directory's routed experts (tests/memory/streamed_logits_test.cpp),
  // in the fast numerics only.
  LoadOptions lo;
  lo.expert_stats = true;
  auto st = Model::load(root + "/sparse", lo);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_NE((*st)->expert_store(), nullptr);
  EXPECT_TRUE((*st)->expert_store()->info().resident);
  lo.v41_oracle = true;
  auto e = Model::load(root + "/sparse", lo);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("fast numerics"), std::string::npos) << e.message();
}

}  // namespace
}  // namespace strata
