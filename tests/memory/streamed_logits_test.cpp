// Streamed experts must not change a single bit: logits with a tiny expert budget (forcing
// eviction on nearly every layer) equal the fully resident run, for every fixture architecture
// and a synth model, in batch (prompt) and incremental (decode) evaluation, with and without
// prefetch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "format/safetensors.h"
#include "format/safetensors_dir.h"
#include "memory/experts/expert_store.h"
#include "memory/store_test_util.h"
#include "model/hparams.h"
#include "model/deepseek_v41/v41_experts.h"
#include "model/model.h"

namespace strata {
namespace {

// Logits of `tokens`: the first n_batch in one eval, the rest one by one. [n][n_vocab].
std::vector<float> run(const std::string& path, const LoadOptions& lo, const std::vector<int32_t>& tokens,
                       size_t n_batch, ExpertStats* stats = nullptr) {
  auto m = Model::load(path, lo);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return {};
  auto s = (*m)->new_session({.n_ctx = static_cast<int>(tokens.size()) + 1, .n_batch = 64});
  EXPECT_TRUE(s.ok()) << s.message();
  const size_t V = static_cast<size_t>((*m)->n_vocab());
  std::vector<float> out(tokens.size() * V);
  Status st = (*s)->eval(std::span<const int32_t>(tokens.data(), n_batch), out.data(), true);
  EXPECT_TRUE(st.ok()) << st.message();
  for (size_t i = n_batch; i < tokens.size() && st.ok(); ++i) {
    st = (*s)->eval(std::span<const int32_t>(&tokens[i], 1), out.data() + i * V, false);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  if (stats && (*m)->expert_store()) *stats = (*m)->expert_store()->stats();
  return out;
}

void expect_streamed_equals_resident(const std::string& path, int n_tokens, size_t n_batch) {
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  std::mt19937 rng(42);
  auto probe = Model::load(path, {});
  ASSERT_TRUE(probe.ok()) << probe.message();
  const HParams& hp = (*probe)->hparams();
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % std::min(509, (*probe)->n_vocab()));
  const std::vector<float> ref = run(path, {}, tokens, n_batch);
  ASSERT_FALSE(ref.empty());
  auto cat = ExpertCatalog::build(**f, hp.n_layer, hp.n_expert);
  ASSERT_TRUE(cat.ok()) << cat.message();
  // The four policy x prefetch mixes on the default engine, and two on the sync one (naive: lru
  // without prefetch; the default policy with prefetch, all of its reads blocking).
  // Last, a profile: the store warm-starts with its hottest experts and seeds the policy.
  const std::string profile = "/tmp/strata_streamed_profile_" + std::to_string(::getpid()) + ".csv";
  {
    FILE* p = std::fopen(profile.c_str(), "w");
    ASSERT_TRUE(p);
    std::fprintf(p, "layer,expert,count\n");
    for (int l = 0; l < hp.n_layer; ++l)
      for (int e = 0; e < hp.n_expert; ++e) std::fprintf(p, "%d,%d,%d\n", l, e, (l * 7 + e * 3) % 11);
    std::fclose(p);
  }
  struct Mix {
    const char* policy;
    bool prefetch;
    const char* backend;
    bool profile = false;
  };
  for (const Mix& mix : {Mix{"lru", false, "auto"}, Mix{"lru", true, "auto"}, Mix{"adaptive", false, "auto"},
                         Mix{"adaptive", true, "auto"}, Mix{"lru", false, "sync"},
                         Mix{"adaptive", true, "sync"}, Mix{"adaptive", true, "auto", true}}) {
    LoadOptions lo;
    lo.experts.budget_bytes = cat->slot_bytes() * static_cast<uint64_t>(hp.n_expert_used);  // the minimum
    lo.experts.policy = mix.policy;
    lo.experts.prefetch = mix.prefetch;
    lo.experts.io_threads = 2;
    lo.experts.io_backend = mix.backend;
    if (mix.profile) lo.experts.profile_path = profile;
    ExpertStats st;
    const std::vector<float> got = run(path, lo, tokens, n_batch, &st);
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)))
        << path << " policy " << mix.policy << " prefetch " << mix.prefetch << " backend " << mix.backend
        << " profile " << mix.profile;
    EXPECT_GT(st.totals().misses, 0u);
    EXPECT_GT(st.totals().evictions, 0u);
    EXPECT_EQ(st.totals().tokens, n_tokens);
  }
  std::remove(profile.c_str());
}

TEST(StreamedLogits, FixtureModelsBitIdentical) {
  STRATA_REQUIRE_FIXTURES(dir);
  for (const char* m : {"tiny-qwen3moe-f32", "tiny-qwen3moe-Q8_0", "tiny-qwen3moe-Q4_0",
                        "tiny-llama-moe-Q8_0", "tiny-qwen2moe-f32", "tiny-qwen2moe-Q8_0", "tiny-gpt-oss-f32",
                        "tiny-gpt-oss-MXFP4_MOE", "tiny-deepseek4-f32", "tiny-deepseek4-MXFP4_MOE"}) {
    SCOPED_TRACE(m);
    expect_streamed_equals_resident(dir + "/models/" + m + ".gguf", 40, 24);
  }
}

TEST(StreamedLogits, SynthModelBitIdentical) {
  SynthModelFile sm("streamed_synth", 4, 16, 4, "q4_0");
  expect_streamed_equals_resident(sm.path, 24, 16);
}

TEST(StreamedLogits, BudgetTooSmallIsALoadError) {
  SynthModelFile sm("streamed_small", 2, 8, 2, "q8_0");
  LoadOptions lo;
  lo.experts.budget_bytes = 4096;
  auto m = Model::load(sm.path, lo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("minimum"), std::string::npos) << m.message();
}

TEST(StreamedLogits, DenseModelRejectsABudget) {
  SynthModelFile sm("streamed_dense", 2, 0, 0, "q8_0", "llama");
  LoadOptions lo;
  lo.experts.budget_bytes = 1 << 20;
  auto m = Model::load(sm.path, lo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("no routed experts"), std::string::npos) << m.message();
}

// --- DeepSeek-V4.1 checkpoint directories: experts read from the safetensors shards ----------------

struct StEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A checkpoint directory from `src`'s config.json and engram_meta.json and these tensors, written
// as two shards and an index (so the store reads from more than one file).
void write_v41_dir(const std::string& src, const std::filesystem::path& dir, const std::vector<StEntry>& es) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "engram_meta.json"})
    std::filesystem::copy_file(src + "/" + f, dir / f);
  nlohmann::json wm = nlohmann::json::object();
  for (int shard = 0; shard < 2; ++shard) {
    const std::string name = "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
    nlohmann::json h = nlohmann::json::object();
    size_t off = 0;
    std::vector<const StEntry*> mine;
    for (size_t i = 0; i < es.size(); ++i) {
      if (static_cast<int>(i % 2) != shard) continue;
      const StEntry& e = es[i];
      h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {off, off + e.bytes.size()}}};
      off += e.bytes.size();
      wm[e.name] = name;
      mine.push_back(&e);
    }
    const std::string hs = h.dump();
    std::ofstream f(dir / name, std::ios::binary);
    const uint64_t n = hs.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << hs;
    for (const StEntry* e : mine)
      f.write(reinterpret_cast<const char*>(e->bytes.data()), static_cast<std::streamsize>(e->bytes.size()));
  }
  std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"weight_map", wm}}.dump();
}

bool is_routed_weight(const std::string& n) {
  return n.find(".ffn.experts.") != std::string::npos && n.size() > 7 &&
         n.compare(n.size() - 7, 7, ".weight") == 0;
}

// The fixture's tensors, routed experts as FP4 (random E2M1 pairs, UE8M0 scales near 1) if fp4.
std::vector<StEntry> v41_entries(const std::string& src, bool fp4, uint32_t seed) {
  auto f = SafetensorsFile::open(src + "/model.safetensors");
  EXPECT_TRUE(f.ok()) << f.message();
  std::vector<StEntry> es;
  std::mt19937 g(seed);
  for (const StTensor& t : f.value()->tensors()) {
    if (!fp4 || !is_routed_weight(t.name)) {
      es.push_back(
          {t.name, st_dtype_name(t.dtype), t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
      continue;
    }
    const int64_t out = t.shape[0], in = t.shape[1];
    StEntry w{t.name, "I8", {out, in / 2}, std::vector<uint8_t>(static_cast<size_t>(out * in / 2))};
    StEntry sc{t.name.substr(0, t.name.size() - 7) + ".scale",
               "F8_E8M0",
               {out, in / 32},
               std::vector<uint8_t>(static_cast<size_t>(out * in / 32))};
    for (auto& b : w.bytes) b = static_cast<uint8_t>(g());
    for (auto& b : sc.bytes) b = static_cast<uint8_t>(122 + g() % 5);
    es.push_back(std::move(w));
    es.push_back(std::move(sc));
  }
  return es;
}

TEST(StreamedLogits, V41CheckpointBitIdentical) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  const std::string src = root + "/deep";
  const std::filesystem::path base =
      std::filesystem::temp_directory_path() / ("strata_v41_stream_" + std::to_string(::getpid()));
  std::vector<int32_t> tokens(40);
  std::mt19937 rng(7);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 256);
  // The fixture as it is (BF16 experts, one file), and as FP4 experts over two shards.
  for (bool fp4 : {false, true}) {
    SCOPED_TRACE(fp4 ? "FP4 experts, 2 shards" : "BF16 experts");
    std::string path = src;
    if (fp4) {
      path = (base / "fp4").string();
      write_v41_dir(src, path, v41_entries(src, true, 3));
    }
    const std::vector<float> ref = run(path, {}, tokens, 24);
    ASSERT_FALSE(ref.empty());
    if (fp4) {  // no budget: the store serves the resident stacks (statistics only)
      LoadOptions stats_only;
      stats_only.expert_stats = true;
      ExpertStats rs;
      EXPECT_EQ(run(path, stats_only, tokens, 24, &rs), ref);
      EXPECT_GT(rs.totals().hits, 0u);
      EXPECT_EQ(rs.totals().misses, 0u);
      EXPECT_EQ(rs.totals().tokens, 40);
    }
    auto dir = SafetensorsDir::open(path);
    ASSERT_TRUE(dir.ok()) << dir.message();
    auto cfg = v41::parse_config(read_text_file(path + "/config.json").value(), "config.json");
    ASSERT_TRUE(cfg.ok()) << cfg.message();
    auto cat = v41::v41_expert_catalog(**dir, *cfg);
    ASSERT_TRUE(cat.ok()) << cat.message();
    EXPECT_EQ(cat->has_transform(), fp4);
    const uint64_t slot = cat->slot_bytes();
    struct Mix {
      const char* backend;
      bool prefetch;
    };
    std::vector<Mix> mixes = {{"sync", false}, {"threads", true}};
    if (fp4) mixes.push_back({"auto", true});  // io_uring where it can be set up: one ring, two shards
    for (const Mix& mix : mixes) {
      LoadOptions lo;
      lo.experts.budget_bytes = slot * 3;  // top-2 + one: misses and evictions on every layer
      lo.experts.policy = "lru";
      lo.experts.prefetch = mix.prefetch;
      lo.experts.io_threads = 2;
      lo.experts.io_backend = mix.backend;
      ExpertStats st;
      const std::vector<float> got = run(path, lo, tokens, 24, &st);
      ASSERT_EQ(got.size(), ref.size());
      EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)))
          << "backend " << mix.backend << " prefetch " << mix.prefetch;
      EXPECT_GT(st.totals().misses, 0u);
      EXPECT_GT(st.totals().evictions, 0u);
      if (mix.prefetch) {
        EXPECT_GT(st.totals().prefetch_issued, 0u);  // the look-ahead of V4.1's routers
      }
    }
  }
  std::filesystem::remove_all(base);
}

TEST(StreamedLogits, V41CheckpointBadExpertsAreErrors) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  const std::string src = root + "/deep";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("strata_v41_bad_" + std::to_string(::getpid()));
  const std::vector<StEntry> good = v41_entries(src, true, 5);
  LoadOptions lo;
  lo.experts.budget_bytes = 1 << 20;
  lo.experts.io_backend = "sync";
  const std::string scale = "layers.2.ffn.experts.5.w3.scale";
  auto message = [&](std::vector<StEntry> es, bool at_eval) {
    write_v41_dir(src, dir, es);
    auto m = Model::load(dir.string(), lo);
    if (!at_eval || !m.ok()) return m.ok() ? std::string("loaded") : m.message();
    auto s = (*m)->new_session({.n_ctx = 16, .n_batch = 16});
    std::vector<int32_t> toks(12);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>(i * 37 % 256);
    std::vector<float> out(static_cast<size_t>((*m)->n_vocab()));
    const Status st = (*s)->eval(toks, out.data(), false);
    return st.ok() ? std::string("ran") : st.message();
  };
  // A scale tensor that does not match its weight's blocks: a load error naming it, expected vs actual.
  std::vector<StEntry> es = good;
  for (StEntry& e : es)
    if (e.name == scale) {
      e.shape = {64, 2};
      e.bytes.resize(128);
    }
  std::string msg = message(es, false);
  EXPECT_NE(msg.find(scale), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected F8_E8M0 [64, 4], got F8_E8M0 [64, 2]"), std::string::npos) << msg;
  // A weight of the wrong dtype.
  es = good;
  for (StEntry& e : es)
    if (e.name == "layers.1.ffn.experts.0.w2.weight") {
      e.dtype = "U16";
      e.shape = {128, 16};
    }
  msg = message(es, false);
  EXPECT_NE(msg.find("layers.1.ffn.experts.0.w2.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("FP4"), std::string::npos) << msg;
  // A corrupted scale (NaN) in the shard: the read of that expert fails, naming the tensor.
  es = good;
  for (StEntry& e : es)
    if (e.name.find(".ffn.experts.") != std::string::npos && e.name.find(".scale") != std::string::npos)
      std::fill(e.bytes.begin(), e.bytes.begin() + 3, uint8_t{0xff});
  msg = message(es, true);
  EXPECT_NE(msg.find("is NaN"), std::string::npos) << msg;
  EXPECT_NE(msg.find(".scale"), std::string::npos) << msg;
  // A shard truncated after the model was loaded: the read fails naming the shard, never wrong weights.
  write_v41_dir(src, dir, good);
  {
    auto m = Model::load(dir.string(), lo);
    ASSERT_TRUE(m.ok()) << m.message();
    const std::filesystem::path shard = dir / "model-00002-of-00002.safetensors";
    std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 4096);
    auto s = (*m)->new_session({.n_ctx = 16, .n_batch = 16});
    std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6};
    std::vector<float> out(static_cast<size_t>((*m)->n_vocab()));
    const Status st = (*s)->eval(toks, out.data(), false);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("model-00002-of-00002.safetensors"), std::string::npos) << st.message();
  }
  // A shard missing.
  write_v41_dir(src, dir, good);
  std::filesystem::remove(dir / "model-00001-of-00002.safetensors");
  msg = Model::load(dir.string(), lo).message();
  EXPECT_NE(msg.find("model-00001-of-00002.safetensors"), std::string::npos) << msg;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata
