// End to end on the V4.1 fixtures: the forward reading its Engram rows from the SSD tier (a row
// cache smaller than the tables, O_DIRECT reads of the checkpoint) gives logits bit-identical to
// the resident run, in prefill and in token-by-token decode, with prefetch on and off; the stall
// per token is reported for both.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "model/deepseek_v41/v41_arch.h"

namespace strata {
namespace {

struct Logits {
  std::vector<float> prefill, decode;
};

// Prefill of the whole sequence (all logits), then a fresh state: P0 tokens, one per step.
Logits run_both(const Architecture& arch, const std::vector<int32_t>& toks, int P0) {
  const int n = static_cast<int>(toks.size()), V = arch.hparams().n_vocab;
  Logits r;
  r.prefill.resize(static_cast<size_t>(n) * V);
  r.decode.resize(static_cast<size_t>(n) * V);
  ThreadPool pool(1);
  auto st = arch.new_state({.n_ctx = n, .n_batch = n, .n_threads = 1});
  EXPECT_TRUE(st.ok());
  Status s = forward_one(arch, **st, std::span<const int32_t>(toks), 0, true, r.prefill.data(), pool);
  EXPECT_TRUE(s.ok()) << s.message();
  auto sd = arch.new_state({.n_ctx = n, .n_batch = n, .n_threads = 1});
  EXPECT_TRUE(sd.ok());
  s = forward_one(arch, **sd, std::span<const int32_t>(toks).subspan(0, P0), 0, true, r.decode.data(), pool);
  EXPECT_TRUE(s.ok()) << s.message();
  for (int i = P0; i < n; ++i) {
    s = forward_one(arch, **sd, std::span<const int32_t>(toks).subspan(i, 1), i, true,
                    r.decode.data() + static_cast<size_t>(i) * V, pool);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  return r;
}

class EngramE2e : public ::testing::TestWithParam<const char*> {};

TEST_P(EngramE2e, SsdTierLogitsEqualResident) {
  STRATA_REQUIRE_FIXTURES_V41(root);
  const std::string mdir = root + "/" + GetParam();
  std::ifstream tin(mdir + "/s48.tokens.json");
  const auto tj = nlohmann::json::parse(tin);
  const std::vector<int32_t> toks = tj.at("tokens").get<std::vector<int32_t>>();
  const int P0 = tj.at("decode_prefill_len").get<int>();

  auto resident = load_deepseek_v41_dir(mdir);
  ASSERT_TRUE(resident.ok()) << resident.message();
  const Logits want = run_both(*resident->arch, toks, P0);

  const v41::Config& c = resident->model->cfg;
  uint64_t table_bytes = 0;
  uint64_t held_bytes = 0;  // resident in fast numerics: E4M3 values + UE8M0 scales, a byte each
  for (int64_t rows : c.engram_rows) {
    table_bytes += static_cast<uint64_t>(rows) * (c.engram_head_dim * 4 + 4);
    held_bytes += static_cast<uint64_t>(rows) * (c.engram_head_dim + c.engram_head_dim / 32);
  }
  for (bool prefetch : {true, false}) {
    EngramStoreOptions o;
    o.budget_bytes = table_bytes / 4;  // a quarter of the tables
    o.prefetch = prefetch;
    o.io_threads = 2;
    auto loaded = load_deepseek_v41_dir(mdir, o);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    ASSERT_TRUE(loaded->engram);
    ASSERT_EQ(loaded->model->engram_rows, loaded->engram.get());
    // No table in the weights: exactly the tables' bytes fewer than the resident load.
    EXPECT_EQ(loaded->model->w.bytes + held_bytes, resident->model->w.bytes);
    for (int l : c.engram_layers) {
      EXPECT_EQ(loaded->model->w.layers[static_cast<size_t>(l)].e_embed.rows, 0);
      EXPECT_EQ(loaded->model->w.layers[static_cast<size_t>(l)].e_scale.rows, 0);
    }
    const EngramStore& store = loaded->engram->store();
    ASSERT_EQ(store.info().tier, "ssd");
    ASSERT_LT(store.info().cache_bytes, table_bytes);
    const Logits got = run_both(*loaded->arch, toks, P0);
    EXPECT_EQ(0, std::memcmp(want.prefill.data(), got.prefill.data(), want.prefill.size() * sizeof(float)))
        << GetParam() << " prefill, prefetch " << prefetch;
    EXPECT_EQ(0, std::memcmp(want.decode.data(), got.decode.data(), want.decode.size() * sizeof(float)))
        << GetParam() << " decode, prefetch " << prefetch;
    const EngramStats s = store.stats();
    const EngramTotals& t = s.totals;
    // prefill (48) + decode (P0, then 48 - P0 single tokens): every token's rows of every layer
    const uint64_t per_token = static_cast<uint64_t>(c.n_hash_cols()) * c.engram_layers.size();
    EXPECT_EQ(t.tokens, 2 * static_cast<int64_t>(toks.size()));
    EXPECT_EQ(t.steps, 2 + static_cast<int64_t>(toks.size()) - P0);
    EXPECT_EQ(t.lookups, per_token * 2 * toks.size());
    EXPECT_GT(t.misses + t.late, 0u);
    EXPECT_EQ(t.read_errors, 0u);
    if (!prefetch) {
      EXPECT_EQ(t.prefetch_issued, 0u);
    } else {
      EXPECT_GT(t.prefetch_issued, 0u);
    }
    std::printf(
        "[engram] %s s48, budget %llu of %llu table bytes (%lld rows), prefetch %s: hit %.1f%% (%llu hits, "
        "%llu late, %llu misses), %llu bytes read, stall %.4f ms/token\n",
        GetParam(), static_cast<unsigned long long>(store.info().cache_bytes),
        static_cast<unsigned long long>(table_bytes), static_cast<long long>(store.info().n_slots),
        prefetch ? "on" : "off", 100.0 * t.hit_rate(), static_cast<unsigned long long>(t.hits),
        static_cast<unsigned long long>(t.late), static_cast<unsigned long long>(t.misses),
        static_cast<unsigned long long>(t.bytes_read), t.stall_ms_per_token());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngramE2e, ::testing::Values("deep", "sparse", "wide"));

}  // namespace
}  // namespace strata
