// With an Engram budget the V4.1 loader keeps the Engram tables out of RAM: the weights hold no
// table, the checkpoint's table bytes are never touched through the mapping, and the forward
// reads its rows through the store. Checked on a copy of the deep fixture whose Engram tables are
// blown up to ~66 MB (every bucket size x kScale, rows tiled from the original table): the tiered
// load + forward grows the resident set by far less than the tables, the resident load by more
// than them, and both give bit-identical logits. Release-only: ASan's shadow memory inflates RSS.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "format/safetensors_dir.h"
#include "model/deepseek_v41/v41_arch.h"
#include "obs/proc_mem.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
constexpr bool kSanitized = __has_feature(address_sanitizer);
#else
constexpr bool kSanitized = false;
#endif

constexpr int64_t kScale = 300;  // deep: 219,120 table bytes -> 65.7 MB

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

// Copies the checkpoint `src` to `dst` with every Engram bucket size (prime) multiplied by
// kScale: config engram_num_embeddings, engram_meta primes/offsets and the table tensors follow
// (row r of a new table = row r mod rows of the original). Returns the new tables' bytes.
uint64_t write_big_engram_copy(const fs::path& src, const fs::path& dst) {
  fs::create_directories(dst);
  json cfg = read_json(src / "config.json");
  for (auto& n : cfg["engram_num_embeddings"]) n = n.get<int64_t>() * kScale;
  write_text(dst / "config.json", cfg.dump(1));
  json meta = read_json(src / "engram_meta.json");
  for (size_t k = 0; k < meta["primes"].size(); ++k) {
    int64_t run = 0;
    size_t i = 0;
    for (auto& row : meta["primes"][k])
      for (auto& p : row) {
        p = p.get<int64_t>() * kScale;
        meta["offsets"][k][i++] = run;
        run += p.get<int64_t>();
      }
  }
  write_text(dst / "engram_meta.json", meta.dump(1));

  auto dir = SafetensorsDir::open(src.string());
  EXPECT_TRUE(dir.ok()) << dir.message();
  EXPECT_EQ((*dir)->shards().size(), 1u);
  json hdr = json::object();
  std::vector<std::pair<const StTensor*, int64_t>> order;  // tensor, rows after scaling (0: copy)
  uint64_t off = 0, table_bytes = 0;
  for (const StTensor& t : (*dir)->shards()[0]->tensors()) {
    const bool table = t.name.find(".engram.embed.") != std::string::npos;
    std::vector<int64_t> shape = t.shape;
    if (table) shape[0] *= kScale;
    const uint64_t bytes = table ? t.nbytes * kScale : t.nbytes;
    if (table) table_bytes += bytes;
    hdr[t.name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", shape}, {"data_offsets", {off, off + bytes}}};
    order.emplace_back(&t, table ? shape[0] : 0);
    off += bytes;
  }
  std::string h = hdr.dump();
  while (h.size() % 8) h += ' ';
  std::ofstream out(dst / "model.safetensors", std::ios::binary);
  const uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(h.data(), static_cast<std::streamsize>(n));
  for (const auto& [t, rows] : order) {
    if (rows == 0) {
      out.write(reinterpret_cast<const char*>(t->data), static_cast<std::streamsize>(t->nbytes));
      continue;
    }
    const std::string_view one(reinterpret_cast<const char*>(t->data), t->nbytes);
    for (int64_t r = 0; r < kScale; ++r) out.write(one.data(), static_cast<std::streamsize>(one.size()));
  }
  EXPECT_TRUE(out.good());
  return table_bytes;
}

// One forward over `toks` (all logits); returns them.
std::vector<float> forward(const Architecture& arch, const std::vector<int32_t>& toks) {
  const int n = static_cast<int>(toks.size());
  std::vector<float> logits(static_cast<size_t>(n) * arch.hparams().n_vocab);
  ThreadPool pool(1);
  auto st = arch.new_state({.n_ctx = n, .n_batch = n, .n_threads = 1});
  EXPECT_TRUE(st.ok());
  const Status s = forward_one(arch, **st, std::span<const int32_t>(toks), 0, true, logits.data(), pool);
  EXPECT_TRUE(s.ok()) << s.message();
  return logits;
}

uint64_t grown(uint64_t from) {
  const uint64_t now = rss_bytes();
  return now > from ? now - from : 0;
}

TEST(EngramTieredRam, TablesStayOutOfRamAndLogitsMatchResident) {
  if (kSanitized) GTEST_SKIP() << "RSS includes ASan's shadow memory";
  STRATA_REQUIRE_FIXTURES_V41(root);
  if (rss_bytes() == 0) GTEST_SKIP() << "no VmRSS in /proc/self/status";
  const fs::path dst = fs::temp_directory_path() / ("strata_engram_big_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  const uint64_t table_bytes = write_big_engram_copy(fs::path(root) / "deep", dst);
  ASSERT_GT(table_bytes, 60u << 20);
  const std::vector<int32_t> toks = {111, 23, 245, 238, 130, 75, 109, 164, 219, 214, 31, 250};

  // Tiered first, from a trimmed heap: nothing freed earlier can hide a table-sized allocation.
  malloc_trim(0);
  const uint64_t r0 = rss_bytes();
  std::vector<float> tiered;
  uint64_t tiered_growth = 0, cache_bytes = 0;
  {
    EngramStoreOptions o;
    o.budget_bytes = 1u << 20;
    o.io_threads = 2;
    auto m = load_deepseek_v41_dir(dst.string(), o);
    ASSERT_TRUE(m.ok()) << m.message();
    ASSERT_TRUE(m->engram);
    EXPECT_EQ(m->engram->store().info().tier, "ssd");
    EXPECT_EQ(m->engram->store().info().table_bytes, table_bytes);
    cache_bytes = m->engram->store().info().cache_bytes;
    tiered = forward(*m->arch, toks);
    EXPECT_GT(m->engram->store().stats().totals.lookups, 0u);
    tiered_growth = grown(r0);
  }
  malloc_trim(0);
  const uint64_t r1 = rss_bytes();
  std::vector<float> resident;
  uint64_t resident_growth = 0;
  {
    auto m = load_deepseek_v41_dir(dst.string());
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_FALSE(m->engram);
    resident = forward(*m->arch, toks);
    resident_growth = grown(r1);
  }
  fs::remove_all(dst);
  ASSERT_EQ(tiered.size(), resident.size());
  EXPECT_EQ(0, std::memcmp(tiered.data(), resident.data(), tiered.size() * sizeof(float)));
  std::printf(
      "[engram-ram] tables %.1f MB: RSS growth tiered (budget 1 MiB, cache %.2f MB) %.1f MB, resident %.1f "
      "MB\n",
      table_bytes / 1e6, cache_bytes / 1e6, tiered_growth / 1e6, resident_growth / 1e6);
  // Tiered: the other weights (as f32, plus their mapped pages: ~20 MB), the 1 MiB row cache and
  // the I/O staging; no table.
  EXPECT_LT(tiered_growth, table_bytes / 2);
  // Resident: the same plus the f32 tables and their pages of the mapping (read while loading).
  EXPECT_GT(resident_growth, tiered_growth + table_bytes);
}

}  // namespace
}  // namespace strata
