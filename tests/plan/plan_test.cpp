// The memory planner: class bytes from a GGUF equal its tensors; config estimates match known
// parameter counts and a synth GGUF of the same shape; budget recommendation and its errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "memory/engram/engram_table.h"
#include "kv/kv_spill.h"
#include "memory/io/io_engine.h"
#include "plan/planner.h"
#include "model/synth.h"
#include "model/deepseek_v41/v41_arch.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::string data(const char* name) {
  return std::string(STRATA_SOURCE_DIR) + "/tests/data/" + name;
}

uint64_t params(const PlanModel& m) {
  uint64_t s = 0;
  for (uint64_t p : m.class_params) s += p;
  return s;
}

class PlanSynth : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = (fs::temp_directory_path() / ("strata_plan_test_" + std::to_string(getpid()) + ".gguf")).string();
    SynthSpec s;
    s.arch = "qwen3moe";
    s.n_layer = 3;
    s.n_embd = 128;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.expert_ffn = 96;
    s.n_vocab = 600;
    s.type = "q8_0";
    s.n_ctx = 2048;
    s.n_threads = 1;
    ASSERT_TRUE(synth_validate(s).ok());
    auto r = synth_write(s, path_);
    ASSERT_TRUE(r.ok()) << r.message();
  }
  static void TearDownTestSuite() { fs::remove(path_); }
  static inline std::string path_;
};

TEST_F(PlanSynth, GgufClassesAddUpToTheFile) {
  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok()) << f.message();
  auto m = plan_model_from_gguf(**f);
  ASSERT_TRUE(m.ok()) << m.message();
  uint64_t all = 0, routed = 0;
  for (const TensorView& t : (*f)->tensors()) {
    all += t.nbytes;
    if (t.name.find("_exps") != std::string::npos) routed += t.nbytes;
  }
  EXPECT_EQ(m->dense_bytes() + m->class_bytes[plan_class_routed], all);
  EXPECT_EQ(m->class_bytes[plan_class_routed], routed);
  EXPECT_EQ(m->n_moe_layers, 3);
  EXPECT_EQ(m->n_expert, 8);
  EXPECT_EQ(m->n_expert_used, 2);
  EXPECT_EQ(m->n_vocab, 600);
  EXPECT_EQ(m->expert_bytes, routed / 24);
  EXPECT_EQ(m->slot_bytes % 4096, 0u);
  EXPECT_GE(m->slot_bytes, m->expert_bytes);
  EXPECT_LE(m->slot_bytes, m->expert_bytes + 6 * 4096);
  EXPECT_GT(m->class_bytes[plan_class_attention], 0u);
  EXPECT_GT(m->class_bytes[plan_class_embed_output], 0u);
  EXPECT_EQ(m->kv.n_layer, 3);
}

TEST_F(PlanSynth, ConfigEstimateMatchesTheGguf) {
  // The same shapes as a config.json: the estimate at q8_0 equals the file class by class.
  const std::string cfg = R"({"model_type":"qwen3_moe","hidden_size":128,"num_hidden_layers":3,
    "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"num_experts":8,"num_experts_per_tok":2,
    "moe_intermediate_size":96,"intermediate_size":96,"vocab_size":600,"max_position_embeddings":2048,
    "tie_word_embeddings":false})";
  PlanTypes ty;
  ty.expert = GgmlType::q8_0;
  ty.dense = GgmlType::q8_0;
  auto c = plan_model_from_hf_config_text(cfg, "cfg", ty);
  ASSERT_TRUE(c.ok()) << c.message();
  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok());
  auto g = plan_model_from_gguf(**f);
  ASSERT_TRUE(g.ok());
  for (int k = 0; k < plan_class_count; ++k) {
    EXPECT_EQ(c->class_params[k], g->class_params[k]) << plan_class_name(k);
    EXPECT_EQ(c->class_bytes[k], g->class_bytes[k]) << plan_class_name(k);
  }
  EXPECT_EQ(c->expert_bytes, g->expert_bytes);
  PlanOptions o;
  auto bc = plan_make(*c, o), bg = plan_make(*g, o);
  ASSERT_TRUE(bc.ok() && bg.ok());
  EXPECT_EQ(bc->kv_cache, bg->kv_cache);
  EXPECT_EQ(bc->scratch, bg->scratch);
}

// serve's prefix-cache spill tiers, priced when asked: the RAM tier (-cram; with --prefix-cache-dir
// and no -cram, serve's default: the KV pool's bytes) and the SSD write queue count as RAM, the
// files' budget is reported apart.
TEST_F(PlanSynth, ServeSpillTiersAreBilledAsTheKvPoolSizesThem) {
  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok());
  auto m = plan_model_from_gguf(**f);
  ASSERT_TRUE(m.ok());
  PlanOptions o;
  o.n_ctx = 512;
  o.n_seq = 2;
  o.n_threads = 2;
  auto none = plan_make(*m, o);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->kv_spill(), 0u);
  EXPECT_TRUE(none->kv_spill_note.empty());
  const uint64_t per_pos = 3u * 2 * 2 * 32 * 4;  // layers x (K+V) x kv heads x head_dim x f32
  ASSERT_EQ(none->kv_cache, per_pos * 512 * 2);
  o.cache_ram = -1;  // serve's default
  o.prefix_cache_dir = true;
  o.prefix_cache_dir_size = 1 << 20;
  auto dflt = plan_make(*m, o);
  ASSERT_TRUE(dflt.ok()) << dflt.message();
  EXPECT_EQ(dflt->kv_ram_tier, none->kv_cache);   // 2 sequences x 512 positions, whole blocks of 16
  const uint64_t record = 16 * per_pos + 16 * 4;  // a block's rows and tokens
  EXPECT_EQ(dflt->kv_spill_queue, std::min<uint64_t>(kSpillQueueBytes / record, 1024) * record);
  EXPECT_TRUE(dflt->kv_ssd);
  EXPECT_EQ(dflt->kv_ssd_file, 128 + 16 * 4 + 16 * per_pos);
  EXPECT_EQ(dflt->kv_ssd_budget, 1u << 20);
  EXPECT_EQ(dflt->total, none->total + dflt->kv_ram_tier + dflt->kv_spill_queue);
  EXPECT_NE(plan_text(*dflt).find("kv_ram_tier"), std::string::npos);
  EXPECT_NE(plan_json(*dflt).find("\"kv_spill_queue\""), std::string::npos);
  o.cache_ram = 3 << 20;
  o.prefix_cache_dir = false;
  o.prefix_cache_dir_size = 0;
  auto ram = plan_make(*m, o);
  ASSERT_TRUE(ram.ok());
  EXPECT_EQ(ram->kv_ram_tier, 3u << 20);
  EXPECT_EQ(ram->kv_spill_queue, 0u);
  EXPECT_FALSE(ram->kv_ssd);
}

// serve's --kv-budget: the paged pool KvPool sizes for it (whole blocks under the budget), not
// -c x --batch; the RAM tier's default follows it.
TEST_F(PlanSynth, KvBudgetBillsThePoolServeMakes) {
  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok());
  auto m = plan_model_from_gguf(**f);
  ASSERT_TRUE(m.ok());
  PlanOptions o;
  o.n_ctx = 512;
  o.n_seq = 4;
  o.n_threads = 2;
  auto full = plan_make(*m, o);
  ASSERT_TRUE(full.ok());
  const uint64_t per_pos = 3u * 2 * 2 * 32 * 4, block = 16 * per_pos;
  o.kv_budget = 10 * block + block / 2;  // 10 whole blocks
  o.cache_ram = -1;
  auto b = plan_make(*m, o);
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->kv_cache, 10 * block);
  EXPECT_EQ(b->kv_pool_budget, 10 * block);
  EXPECT_EQ(b->kv_pool_default, full->kv_cache);
  EXPECT_EQ(b->kv_ram_tier, o.kv_budget);  // as the engine sizes it: the budget given
  uint64_t lines = 0;
  for (const PlanKvLine& l : b->kv_lines) lines += l.bytes;
  EXPECT_EQ(lines, b->kv_cache);
  EXPECT_EQ(b->total, full->total - full->kv_cache + 10 * block + b->kv_ram_tier);
  EXPECT_NE(plan_text(*b).find("--kv-budget"), std::string::npos);
  o.kv_budget = block / 2;  // under one block: the pool's own error
  auto tiny = plan_make(*m, o);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.message().find("--kv-budget"), std::string::npos) << tiny.message();
}

TEST_F(PlanSynth, BudgetForRam) {
  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok());
  auto m = plan_model_from_gguf(**f);
  ASSERT_TRUE(m.ok());
  PlanOptions o;
  o.n_ctx = 512;
  o.n_threads = 2;
  o.margin = 1 << 20;
  auto all = plan_make(*m, o);  // no RAM: everything resident
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->expert_weights_resident, all->expert_weights_total);
  EXPECT_EQ(all->io_buffers, 0u);
  EXPECT_EQ(all->total,
            all->dense_weights + all->expert_weights_total + all->kv_cache + all->scratch + all->runtime);
  EXPECT_EQ(all->kv_cache, 3u * 2 * 2 * 32 * 4 * 512);  // layers x (K+V) x kv heads x head_dim x f32 x ctx

  const uint64_t other = all->dense_weights + all->kv_cache + all->scratch + all->runtime + o.margin;
  o.ram = other + all->expert_weights_total;  // exactly enough
  auto fit = plan_make(*m, o);
  ASSERT_TRUE(fit.ok());
  EXPECT_TRUE(fit->fits);
  EXPECT_EQ(fit->recommended_budget, 0u);

  const uint64_t slot = m->slot_bytes, io = 4 * 64 * 1024;  // 4 I/O threads
  o.ram = other + io + 5 * slot + slot / 2;                 // room for 5 slots
  auto part = plan_make(*m, o);
  ASSERT_TRUE(part.ok());
  EXPECT_TRUE(part->fits);
  EXPECT_EQ(part->expert_slots, 5);
  EXPECT_EQ(part->recommended_budget, 5 * slot);
  EXPECT_EQ(part->io_buffers, io);
  EXPECT_LE(part->total + part->margin, o.ram);

  o.ram = other + io + slot;  // below top-2
  auto small = plan_make(*m, o);
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(small->fits);
  EXPECT_NE(small->problem.find("top-2"), std::string::npos) << small->problem;
  EXPECT_NE(small->problem.find("minimum RAM"), std::string::npos) << small->problem;
  EXPECT_EQ(small->expert_weights_resident, 2 * slot);

  // A given --expert-budget is priced as the store would use it: whole slots.
  PlanOptions ob = o;
  ob.ram = 0;
  ob.expert_budget = 7 * slot + 100;
  auto given = plan_make(*m, ob);
  ASSERT_TRUE(given.ok()) << given.message();
  EXPECT_EQ(given->expert_slots, 7);
  EXPECT_EQ(given->expert_weights_resident, 7 * slot);
  EXPECT_EQ(given->io_buffers, io);
  // The io_uring backend is priced by its rings for --io-depth reads, not as threads.
  PlanOptions ou = ob;
  ou.io_backend = IoBackend::io_backend_uring;
  ou.io_depth = 64;
  auto ring = plan_make(*m, ou);
  ASSERT_TRUE(ring.ok()) << ring.message();
  EXPECT_EQ(ring->io_buffers, io_engine_planned_bytes(IoBackend::io_backend_uring, 4, 64));
  EXPECT_GT(ring->io_buffers, 64u * 1024 + 2 * 4096);  // a thread's stack + at least the two ring mappings
  EXPECT_EQ(ring->total - ring->io_buffers, given->total - given->io_buffers);
  EXPECT_NE(plan_text(*ring).find("io_uring ring for 64 reads"), std::string::npos) << plan_text(*ring);
  EXPECT_EQ(nlohmann::json::parse(plan_json(*ring))["io_backend"], "uring");
  ob.expert_budget = slot;  // below top-2
  auto tiny = plan_make(*m, ob);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.message().find("top-2"), std::string::npos) << tiny.message();

  const auto j = nlohmann::json::parse(plan_json(*part));
  for (const char* k :
       {"dense_weights", "expert_weights_resident", "kv_cache", "scratch", "io_buffers", "total",
        "recommended_expert_budget", "fits", "kv_cache_lines", "dense_weights_by_class"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["total"].get<uint64_t>(), part->total);
  const std::string text = plan_text(*part);
  EXPECT_NE(text.find("--expert-budget"), std::string::npos) << text;
}

TEST(PlanConfig, DeepSeekV4Flash) {
  auto m = plan_model_from_hf_config(data("deepseek-v4-flash.config.json"));
  ASSERT_TRUE(m.ok()) << m.message();
  // 43 layers x 256 experts x 3 x 4096 x 2048 routed parameters, MXFP4 (17 B / 32).
  const uint64_t routed = 43ull * 256 * 3 * 4096 * 2048;
  EXPECT_EQ(m->class_params[plan_class_routed], routed);
  EXPECT_EQ(m->class_bytes[plan_class_routed], routed / 32 * 17);
  EXPECT_EQ(m->n_expert_used, 6);
  // ~284B parameters in all (the published size), ~7B outside the routed experts.
  EXPECT_NEAR(static_cast<double>(params(*m)) / 1e9, 284.0, 2.0);
  EXPECT_GT(m->class_params[plan_class_attention], 4'000'000'000ull);
  EXPECT_GT(m->class_params[plan_class_shared], 1'000'000'000ull);
  PlanOptions o;
  o.n_ctx = 65536;
  o.ram = 64ull << 30;
  auto b = plan_make(*m, o);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->fits);
  EXPECT_GT(b->recommended_budget, 40ull << 30);
  EXPECT_LT(b->expert_slots, b->expert_count);
  EXPECT_EQ(b->kv_lines.size(), 7u);  // csa, hca, indexer, window + 3 compressor states
}

// The issue's bars at the V4-Flash shape, summed over the plan's per-part lines (each part at the
// type its cache takes: kv_spec_typed): fp8 KV + mxfp4 indexer <= 3,215 B/token (vLLM's layout
// ~3,514), mxfp4 + mxfp4 <= 1,830 B/token; -ctv is ignored (K = V); no type asked: f32 (as run).
TEST(PlanConfig, DeepSeekV4FlashTypedKvPerPart) {
  auto m = plan_model_from_hf_config(data("deepseek-v4-flash.config.json"));
  ASSERT_TRUE(m.ok()) << m.message();
  auto per_token = [&](KvType k, KvType v, bool index, bool dflt = false) {
    PlanOptions o;
    o.n_ctx = 65536;
    o.kv_type = k;
    o.kv_type_v = v;
    o.kv_type_default = dflt;
    o.has_kv_type_index = index;
    o.kv_type_index = KvType::mxfp4;
    auto b = plan_make(*m, o);
    EXPECT_TRUE(b.ok()) << b.message();
    double s = 0;
    for (const PlanKvLine& l : b->kv_lines) {
      s += l.bytes_per_token;
      if (l.name == "indexer") {
        EXPECT_EQ(l.type, index ? "mxfp4" : kv_type_name(dflt ? KvType::f32 : k));
      }
      if (l.name.find("state") != std::string::npos) {
        EXPECT_EQ(l.type, "f32");
      }
    }
    return s;
  };
  // csa 21 x 528 / 4 + hca 20 x 528 / 128 + indexer 21 x 68 / 4
  EXPECT_DOUBLE_EQ(per_token(KvType::fp8_e4m3, KvType::fp8_e4m3, true), 2772.0 + 82.5 + 357.0);
  EXPECT_LE(per_token(KvType::fp8_e4m3, KvType::f32, true), 3215.0);  // -ctv ignored
  EXPECT_DOUBLE_EQ(per_token(KvType::mxfp4, KvType::mxfp4, true), 1428.0 + 42.5 + 357.0);
  EXPECT_LE(per_token(KvType::mxfp4, KvType::mxfp4, false), 1830.0);            // the index follows -ctk
  EXPECT_DOUBLE_EQ(per_token(KvType::f16, KvType::f16, false, true), 13760.0);  // a default: f32
}

// V4.1-Flash's shape: the plan's per-part lines at the reference's own types (-ctk native) sum to
// 890 B/token, 6,400 at f32.
TEST(PlanConfig, DeepSeekV41FlashNativeKvPerPart) {
  auto m = plan_model_from_hf_config(data("deepseek-v4.1-flash.config.json"));
  ASSERT_TRUE(m.ok()) << m.message();
  for (bool native : {false, true}) {
    PlanOptions o;
    o.n_ctx = 65536;
    o.kv_native = native;
    auto b = plan_make(*m, o);
    ASSERT_TRUE(b.ok()) << b.message();
    double s = 0;
    for (const PlanKvLine& l : b->kv_lines) s += l.bytes_per_token;
    EXPECT_DOUBLE_EQ(s, native ? 890.0 : 6400.0);
  }
}

// DeepSeek-V4.1-Flash at real size (tests/data/deepseek-v4.1-flash.config.json; numbers and their
// sources in the sibling .md): parameters, the CSA2 layer schedule, 890 B/token at the reference's
// storage, and the Engram tables' tiers.
TEST(PlanConfig, DeepSeekV41FlashParametersAndEngram) {
  auto m = plan_model_from_hf_config(data("deepseek-v4.1-flash.config.json"));
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->arch, "deepseek_v41");
  const uint64_t routed = 40ull * 384 * 3 * 5120 * 2304;  // 543.6B (deepseek-v4.md §4.1)
  EXPECT_EQ(m->class_params[plan_class_routed], routed);
  EXPECT_EQ(m->class_bytes[plan_class_routed], routed / 32 * 17);
  EXPECT_EQ(m->n_moe_layers, 40);
  // backbone ~552B: routed + attention ~5.1B + shared 1.4B + embed/head 1.3B (+ Engram projections)
  EXPECT_NEAR(static_cast<double>(m->class_params[plan_class_attention]) / 1e9, 5.1, 0.1);
  EXPECT_NEAR(static_cast<double>(m->class_params[plan_class_shared]) / 1e9, 1.4, 0.05);
  EXPECT_EQ(m->class_params[plan_class_embed_output], 2ull * 129280 * 5120);
  EXPECT_EQ(m->class_params[plan_class_engram_proj], 2ull * (25600ull * 6144 + 2 * 4 * 5120));
  EXPECT_NEAR(static_cast<double>(params(*m) - m->class_params[plan_class_engram_proj]) / 1e9, 552.0, 1.0);
  // Engram: 2 x ~384M rows x 256 FP8 values + 8 UE8M0 scales = ~2 x 101.4 GB (§3.2)
  EXPECT_EQ(m->engram_tables, 2);
  EXPECT_EQ(m->engram_cols, 24);
  EXPECT_EQ(m->engram_rows, 384006168ll + 384016682ll);
  EXPECT_EQ(m->engram_row_bytes, 264u);
  EXPECT_EQ(m->engram_table_bytes, (384006168ull + 384016682ull) * 264);
  EXPECT_NEAR(static_cast<double>(m->engram_table_bytes) / 1e9, 2 * 101.4, 0.2);

  PlanOptions o;
  o.n_ctx = 32768;
  auto res = plan_make(*m, o);  // no budget: the tables resident
  ASSERT_TRUE(res.ok()) << res.message();
  EXPECT_EQ(res->engram_tier, "ram");
  EXPECT_EQ(res->engram_tables, m->engram_table_bytes);
  EXPECT_EQ(res->total, res->dense_weights + res->expert_weights_resident + res->kv_cache + res->scratch +
                            res->io_buffers + res->runtime + res->engram_tables);
  o.engram_budget = 32ull << 30;  // the SSD tier: a row cache of the budget
  auto ssd = plan_make(*m, o);
  ASSERT_TRUE(ssd.ok()) << ssd.message();
  EXPECT_EQ(ssd->engram_tier, "ssd");
  EXPECT_EQ(ssd->engram_slots, static_cast<int64_t>((32ull << 30) / (264 + kEngramSlotOverhead)));
  EXPECT_LE(ssd->engram_tables, 32ull << 30);
  EXPECT_GT(ssd->engram_tables, 31ull << 30);
  EXPECT_GT(ssd->io_buffers, 0u);
  EXPECT_EQ(ssd->total + m->engram_table_bytes - ssd->engram_tables - ssd->io_buffers, res->total);
  const auto j = nlohmann::json::parse(plan_json(*ssd));
  EXPECT_EQ(j["engram_tier"], "ssd");
  EXPECT_EQ(j["engram_tables"].get<uint64_t>(), ssd->engram_tables);
  EXPECT_EQ(j["engram_table_bytes"].get<uint64_t>(), m->engram_table_bytes);
  const std::string text = plan_text(*ssd);
  EXPECT_NE(text.find("engram_tables"), std::string::npos) << text;
  EXPECT_NE(text.find("tier ssd: row cache of"), std::string::npos) << text;
  // a RAM size that cannot hold the tables resident says how to get out
  o.engram_budget = 0;
  o.ram = 192ull << 30;
  auto tight = plan_make(*m, o);
  ASSERT_TRUE(tight.ok());
  EXPECT_FALSE(tight->fits);
  EXPECT_NE(tight->problem.find("--engram-budget"), std::string::npos) << tight->problem;
  o.engram_budget = 64ull << 30;
  auto fits = plan_make(*m, o);
  ASSERT_TRUE(fits.ok());
  EXPECT_TRUE(fits->fits) << fits->problem;
  EXPECT_GT(fits->recommended_budget, 60ull << 30);  // what is left goes to the routed experts
  // below one token's 24 rows
  o.engram_budget = 23 * (264 + kEngramSlotOverhead);
  auto tiny = plan_make(*m, o);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.message().find("the minimum is 24 rows"), std::string::npos) << tiny.message();
}

TEST(KvBill, DeepSeekV41FlashScheduleAnd890BytesPerToken) {
  auto s = kv_spec_from_hf_config(data("deepseek-v4.1-flash.config.json"));
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->family, KvFamily::deepseek_v41);
  EXPECT_EQ(s->n_layer, 40);
  ASSERT_EQ(s->layer_mode.size(), 40u);
  EXPECT_EQ(s->layer_mode[0], KvLayerMode::window);
  EXPECT_EQ(s->layer_mode[2], KvLayerMode::full);
  EXPECT_EQ(s->layer_mode[7], KvLayerMode::reuse);
  EXPECT_EQ(s->layer_kv_src[7], 2);
  EXPECT_EQ(s->layer_kv_src[13], 8);
  EXPECT_EQ(s->layer_kv_src[39], 20);
  EXPECT_EQ(s->layer_mode[24], KvLayerMode::reindex);
  EXPECT_FALSE(s->layer_index_keys[24]);  // Reindex scores the source's keys: owns none
  EXPECT_TRUE(s->layer_index_keys[20]);
  const KvBill b = kv_bill_make(*s);
  // deepseek-v4.md §4.6: 2.5 compressed rows/token x (288 B FP4 KV + 68 B FP4 index key) = 890 B
  EXPECT_DOUBLE_EQ(b.native_bytes_per_token(), 890.0);
  EXPECT_DOUBLE_EQ(b.bytes_per_token(KvType::f32), 2.5 * (512 + 128) * 4);
  // fixed: 40 window rings of 128 x 512 (FP8 + UE8M0: 528 B/row), 3 ratio-2 pending tokens (f32)
  EXPECT_EQ(b.native_fixed_bytes(65536, 512), 40ull * 128 * 528 + 3ull * 1024 * 4);  // token by token
  const auto j = nlohmann::json::parse(kv_bill_json(b, 65536, 512));
  EXPECT_EQ(j["native_bytes_per_token"].get<double>(), 890.0);
  ASSERT_EQ(j["layers"].size(), 40u);
  EXPECT_EQ(j["layers"][7]["mode"], "reuse");
  EXPECT_EQ(j["layers"][7]["owns_compressed_kv"], false);
  EXPECT_EQ(j["layers"][8]["owns_compressed_kv"], true);
  ASSERT_EQ(j["engram_tables"].size(), 2u);
  EXPECT_EQ(j["engram_tables"][1]["rows"], 384016682);
  const std::string t = kv_bill_text(b, 65536, 512);
  for (const char* want :
       {"4 Full", "4 Reindex", "30 Reuse", "7:r2 reuse[2] win", "20:r1 full[20] win+ckv+ik",
        "24:r1 reindex[20] win", "890.0", "nvfp4", "Engram tables", "202.758 GB"})
    EXPECT_NE(t.find(want), std::string::npos) << want << "\n" << t;
}

// The bill of a fixture model equals what the V4.1 forward allocates (model/v41_forward.h
// V41State, f32 and the reference's own types): both come from v41_kv_spec; and the plan of the
// checkpoint's config prices the states a tool's default makes (native) and -ctk f32's.
TEST(KvBill, DeepSeekV41MatchesTheForwardsState) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  for (const char* model : {"deep", "sparse", "wide"}) {
    const std::string dir = root + "/" + model;
    auto loaded = load_deepseek_v41_dir(dir);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    auto s = kv_spec_from_hf_config(dir + "/config.json");
    ASSERT_TRUE(s.ok()) << s.message();
    const v41::Config& c = loaded->model->cfg;
    for (int l = 0; l < c.n_layers; ++l) {
      EXPECT_EQ(static_cast<int>(s->layer_mode[l]), static_cast<int>(c.layers[l].mode))
          << model << " layer " << l;
      if (c.layers[l].ratio) {
        EXPECT_EQ(s->layer_kv_src[l], c.layers[l].kv_src) << model << " layer " << l;
      }
      EXPECT_EQ(s->layer_index_keys[l], c.layers[l].owns_index_k) << model << " layer " << l;
    }
    auto pm = plan_model_from_hf_config(dir + "/config.json");
    ASSERT_TRUE(pm.ok()) << pm.message();
    for (int n_ctx : {1, 255, 256}) {
      v41::V41State st(*loaded->model, n_ctx, 64);
      const KvBill b = kv_bill_make(*s);
      EXPECT_EQ(b.total_bytes(KvType::f32, n_ctx, 64), st.memory().kv_cache) << model << " n_ctx " << n_ctx;
      for (const bool native : {false, true}) {
        KvTypes t{.is_default = native};
        if (native) t.k = t.v = KvType::f16;  // run's default when not asked
        auto ns = loaded->arch->new_state({.n_ctx = n_ctx, .n_batch = 64, .n_threads = 1, .kv = t});
        ASSERT_TRUE(ns.ok()) << ns.message();
        if (native) {
          EXPECT_EQ(b.native_total_bytes(n_ctx, 64), (*ns)->memory().kv_cache) << model;
        }
        PlanOptions o;
        o.n_ctx = n_ctx;
        o.n_ubatch = 64;
        o.kv_type = t.k;
        o.kv_type_v = t.v;
        o.kv_type_default = native;
        auto pb = plan_make(*pm, o);
        ASSERT_TRUE(pb.ok()) << pb.message();
        EXPECT_EQ(pb->kv_cache, (*ns)->memory().kv_cache)
            << model << " n_ctx " << n_ctx << " native " << native;
      }
    }
  }
}

// A checkpoint directory with an expert budget: `strata plan -m DIR` bills the tier in the expert
// store's own slots (its catalog of the shards), the slots a store of that budget allocates.
TEST(PlanDir, DeepSeekV41ExpertBudgetInTheStoresSlots) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  const std::string dir = root + "/deep";
  auto pm = plan_model_from_checkpoint_dir(dir);
  ASSERT_TRUE(pm.ok()) << pm.message();
  ExpertStoreOptions eo;
  eo.budget_bytes = 5 * pm->slot_bytes + 100;
  eo.io_backend = "sync";
  auto loaded = load_deepseek_v41_dir(dir, {}, v41::V41Numerics::fast, &eo);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  const ExpertStoreInfo& i = loaded->experts->info();
  EXPECT_EQ(pm->slot_bytes, i.slot_bytes);
  EXPECT_EQ(pm->class_bytes[plan_class_routed], i.routed_bytes);
  PlanOptions o;
  o.expert_budget = eo.budget_bytes;
  o.io_backend = IoBackend::io_backend_sync;
  auto b = plan_make(*pm, o);
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->expert_slots, i.n_slots);
  EXPECT_EQ(b->expert_weights_resident, i.tier_bytes);
  EXPECT_LT(b->expert_weights_resident, b->expert_weights_total);
  // Not a V4.1 directory, or no directory: errors naming it.
  EXPECT_FALSE(plan_model_from_checkpoint_dir(root + "/no_such_dir").ok());
}

TEST(PlanConfig, Qwen3MoeAndMixtralParameterCounts) {
  auto q = plan_model_from_hf_config(data("plan/qwen3-30b-a3b.config.json"));
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_NEAR(static_cast<double>(params(*q)) / 1e9, 30.53, 0.01);
  EXPECT_EQ(q->class_params[plan_class_routed], 48ull * 128 * 3 * 2048 * 768);
  auto x = plan_model_from_hf_config(data("plan/mixtral-8x7b.config.json"));
  ASSERT_TRUE(x.ok()) << x.message();
  EXPECT_NEAR(static_cast<double>(params(*x)) / 1e9, 46.70, 0.01);
  EXPECT_EQ(x->n_expert, 8);
  EXPECT_EQ(x->n_ff_exp, 14336);
}

TEST(PlanConfig, BadConfigsNameTheProblem) {
  auto e = plan_model_from_hf_config_text("[1,2]", "c.json");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("not a JSON object"), std::string::npos);
  e = plan_model_from_hf_config_text(R"({"hidden_size":64,"vocab_size":10,"num_attention_heads":2})",
                                     "c.json");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("num_hidden_layers"), std::string::npos) << e.message();
  e = plan_model_from_hf_config_text(
      R"({"num_hidden_layers":2,"hidden_size":64,"vocab_size":10,"num_attention_heads":2,"num_experts":4,
          "num_experts_per_tok":8,"moe_intermediate_size":32})",
      "c.json");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("num_experts_per_tok"), std::string::npos) << e.message();
  e = plan_model_from_hf_config_text(
      R"({"num_hidden_layers":2,"hidden_size":"64","vocab_size":10,"num_attention_heads":2})", "c.json");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("hidden_size"), std::string::npos) << e.message();
  EXPECT_FALSE(plan_model_from_hf_config("/nonexistent/config.json").ok());
  PlanModel m;
  PlanOptions o;
  o.n_seq = 0;
  EXPECT_FALSE(plan_make(m, o).ok());
}

}  // namespace
}  // namespace strata
