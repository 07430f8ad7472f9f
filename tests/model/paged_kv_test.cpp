// Paged KV (kv/kv_pool.h) against the contiguous caches: the same prompt through sessions whose
// full-attention K / V live in pool blocks — handed out interleaved with another sequence's, so
// a sequence's blocks are neither contiguous nor in order — gives logits bit-identical to the
// default sessions, in one batch and in chunks, on the fixture architectures and the bundled
// model (the attention core's key blocks sit at absolute multiples of 64 whatever the layout).
// A session that adopts a cached prefix (KvPool::adopt_prefix) and evaluates only the rest gets
// the same bits as the session that computed it (gpt-oss: its window rings written back from the
// prefix's checkpoint, kv/kv_checkpoints.h).
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "kv/block_pool.h"
#include "kv/kv_pool.h"
#include "model/arch.h"
#include "model/model.h"

namespace strata {
namespace {

std::vector<int32_t> prompt_for(const Model& m, int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 37 + 5) % m.n_vocab());
  return t;
}

// Every row's logits of `tokens` in chunks; pool: a paged session (a decoy sequence takes a block
// before each reservation, so the session's blocks interleave with it).
std::vector<float> eval_rows(const Model& m, const std::vector<int32_t>& tokens, int chunk, KvPool* pool) {
  const int V = m.n_vocab(), n = static_cast<int>(tokens.size());
  std::vector<float> out(static_cast<size_t>(n) * V);
  auto s = m.new_session({.n_ctx = 160, .n_batch = chunk, .kv_pool = pool});
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return out;
  BlockTable decoy = pool ? pool->new_table(1024) : BlockTable();
  for (int i = 0; i < n; i += chunk) {
    const int k = std::min(chunk, n - i);
    if (pool) {
      EXPECT_TRUE(pool->reserve(decoy, decoy.rows() + 1).ok());
      const Status r = pool->reserve(*(*s)->kv_blocks(), i + k);
      EXPECT_TRUE(r.ok()) << r.message();
    }
    const Status st =
        (*s)->eval(std::span<const int32_t>(tokens.data() + i, k), out.data() + size_t(i) * V, true);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  if (pool) pool->release(decoy);
  return out;
}

void expect_paged_same_bits(const std::string& path) {
  auto m = Model::load(path, {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  const auto tokens = prompt_for(**m, 100);
  const int n = static_cast<int>(tokens.size());
  for (int bs : {16, 5}) {
    auto pool =
        KvPool::create((*m)->arch().kv_spec(), (*m)->device(), {.budget_bytes = 64 << 20, .block_size = bs});
    ASSERT_TRUE(pool.ok()) << pool.message();
    for (int chunk : {n, 7}) {
      const auto want = eval_rows(**m, tokens, chunk, nullptr);
      const auto got = eval_rows(**m, tokens, chunk, pool->get());
      EXPECT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()), 0)
          << path << ": paged KV changed the logits (block size " << bs << ", chunk " << chunk << ")";
    }
    EXPECT_EQ((*pool)->stats().blocks.used, 0);  // the sessions gave their blocks back
  }
}

// The prefix of one session, adopted by a second: the rows after it keep their bits.
void expect_prefix_reuse_same_bits(const std::string& path) {
  auto m = Model::load(path, {.n_threads = 2});
  ASSERT_TRUE(m.ok()) << m.message();
  auto pool = KvPool::create((*m)->arch().kv_spec(), (*m)->device(),
                             {.budget_bytes = 64 << 20, .block_size = 16, .checkpoints = 4});
  ASSERT_TRUE(pool.ok()) << pool.message();
  KvPool& kp = **pool;
  ASSERT_TRUE(kp.prefix_cache());
  const auto tokens = prompt_for(**m, 70);
  const int V = (*m)->n_vocab(), n = static_cast<int>(tokens.size());
  const auto want = eval_rows(**m, tokens, n, nullptr);
  auto a = (*m)->new_session({.n_ctx = 160, .n_batch = 64, .kv_pool = &kp});
  ASSERT_TRUE(a.ok()) << a.message();
  std::vector<float> rows(static_cast<size_t>(n) * V);
  ASSERT_TRUE(kp.reserve(*(*a)->kv_blocks(), n).ok());
  ASSERT_TRUE((*a)->eval(tokens, rows.data(), true).ok());
  kp.commit(*(*a)->kv_blocks(), tokens);
  if (kp.checkpoints_on()) {  // window parts: no prefix before a checkpoint of their rows
    auto z = (*m)->new_session({.n_ctx = 160, .n_batch = 64, .kv_pool = &kp});
    ASSERT_TRUE(z.ok()) << z.message();
    EXPECT_EQ(kp.adopt_prefix(*(*z)->kv_blocks(), tokens), 0);
  }
  ASSERT_TRUE((*a)->checkpoint().ok());  // nothing where every part is paged
  auto b = (*m)->new_session({.n_ctx = 160, .n_batch = 64, .kv_pool = &kp});
  ASSERT_TRUE(b.ok()) << b.message();
  const int64_t reused = kp.adopt_prefix(*(*b)->kv_blocks(), tokens);
  EXPECT_EQ(reused, 64);
  ASSERT_TRUE((*b)->assume_prefix(static_cast<int>(reused)).ok());
  ASSERT_TRUE(kp.reserve(*(*b)->kv_blocks(), n).ok());
  std::vector<float> tail(static_cast<size_t>(n - reused) * V);
  ASSERT_TRUE(
      (*b)->eval(std::span<const int32_t>(tokens).subspan(static_cast<size_t>(reused)), tail.data(), true)
          .ok());
  EXPECT_EQ(std::memcmp(want.data() + reused * V, tail.data(), sizeof(float) * tail.size()), 0)
      << path << ": rows after an adopted prefix differ";
  EXPECT_EQ(kp.stats().blocks.shared, 4);
  // Without reserved blocks a step is an error, not a crash.
  auto c = (*m)->new_session({.n_ctx = 160, .n_batch = 64, .kv_pool = &kp});
  ASSERT_TRUE(c.ok());
  const Status st = (*c)->eval(std::span<const int32_t>(tokens).first(3), rows.data(), false);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("reserve them first"), std::string::npos) << st.message();
}

class PagedKv : public ::testing::TestWithParam<const char*> {};

TEST_P(PagedKv, SameBitsAsContiguousRows) {
  STRATA_REQUIRE_FIXTURES(dir);
  expect_paged_same_bits(dir + "/models/" + GetParam());
}

TEST_P(PagedKv, AdoptedPrefixKeepsTheBits) {
  STRATA_REQUIRE_FIXTURES(dir);
  expect_prefix_reuse_same_bits(dir + "/models/" + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PagedKv,
                         ::testing::Values("tiny-qwen3moe-f32.gguf", "tiny-gpt-oss-f32.gguf",
                                           "tiny-llama-moe-f32.gguf", "tiny-qwen2moe-f32.gguf",
                                           "tiny-qwen3moe-Q4_0.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string s = info.param;
                           s = s.substr(5, s.size() - 10);
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(PagedKv, BundledModelSameBits) {
  const std::string path = testing::source_dir() + "/models/strata-moe-31m-mxfp4.gguf";
  expect_paged_same_bits(path);
  expect_prefix_reuse_same_bits(path);
}

TEST(PagedKv, ArchitecturesWithoutPagingSaySo) {
  STRATA_REQUIRE_FIXTURES(dir);
  auto m = Model::load(dir + "/models/tiny-deepseek4-f32.gguf", {.n_threads = 1});
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_FALSE((*m)->arch().paged_kv());
}

}  // namespace
}  // namespace strata
