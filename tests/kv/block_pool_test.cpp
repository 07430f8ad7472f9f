// kv/block_pool.h and kv/kv_pool.h: reference counts, the free list, the LRU of cached blocks,
// plan-then-apply allocation, the hash chain, prefix adoption, and the pool's paged views.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu_device.h"
#include "kv/kv_cache.h"
#include "kv/kv_pool.h"

namespace strata {
namespace {

std::vector<int32_t> toks(int n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(BlockPool, AllocateReleaseCounts) {
  BlockPool p(4, 2);
  EXPECT_EQ(p.available(), 4);
  auto a = p.allocate(3);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->size(), 3u);
  EXPECT_EQ(p.counts().used, 3);
  EXPECT_EQ(p.counts().free, 1);
  for (int32_t b : *a) EXPECT_EQ(p.refs(b), 1);
  p.release((*a)[0]);
  EXPECT_EQ(p.counts().used, 2);
  EXPECT_EQ(p.available(), 2);
}

TEST(BlockPool, FailedPlanChangesNothing) {
  BlockPool p(3, 4);
  ASSERT_TRUE(p.allocate(2).ok());
  const BlockCounts before = p.counts();
  auto r = p.allocate(2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("2 blocks wanted, 1 available"), std::string::npos) << r.message();
  const BlockCounts after = p.counts();
  EXPECT_EQ(after.used, before.used);
  EXPECT_EQ(after.free, before.free);
  EXPECT_EQ(p.available(), 1);
}

TEST(BlockPool, CachedBlocksAreReusedAndSharedByRefcount) {
  BlockPool p(4, 2);
  const auto t = toks(2);
  auto a = p.allocate(1);
  ASSERT_TRUE(a.ok());
  const int32_t b = (*a)[0];
  const uint64_t h = block_hash(0, t, 7);
  EXPECT_TRUE(p.commit(b, h, 0, t));
  EXPECT_FALSE(p.commit(b, h, 0, t));  // named once
  EXPECT_EQ(p.acquire(h, 0, t), b);    // a second sequence shares it
  EXPECT_EQ(p.refs(b), 2);
  EXPECT_EQ(p.counts().shared, 1);
  p.release(b);
  p.release(b);
  EXPECT_EQ(p.counts().cached, 1);  // unreferenced, still named
  EXPECT_EQ(p.counts().used, 0);
  EXPECT_EQ(p.acquire(h, 0, t), b);  // back from the LRU
  EXPECT_EQ(p.counts().cached, 0);
  EXPECT_EQ(p.refs(b), 1);
  // Same hash, other content (a collision) or another parent: a miss.
  const auto other = toks(2, 5);
  EXPECT_EQ(p.acquire(h, 0, other), -1);
  EXPECT_EQ(p.acquire(h, 9, t), -1);
}

TEST(BlockPool, LruEvictsTheLeastRecentlyFreedCachedBlockAfterFreeOnes) {
  BlockPool p(3, 1);
  auto a = p.allocate(3);
  ASSERT_TRUE(a.ok());
  std::vector<uint64_t> h;
  for (int i = 0; i < 3; ++i) {
    const int32_t tk[1] = {i};
    h.push_back(block_hash(0, tk, 1));
    ASSERT_TRUE(p.commit((*a)[static_cast<size_t>(i)], h.back(), 0, tk));
  }
  p.release((*a)[1]);  // freed first: evicted first
  p.release((*a)[0]);
  EXPECT_EQ(p.counts().cached, 2);
  auto b = p.allocate(1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[0], (*a)[1]);
  EXPECT_EQ(p.counts().evicted, 1);
  const int32_t t0[1] = {0}, t1[1] = {1};
  EXPECT_EQ(p.acquire(h[1], 0, t1), -1);  // its name went with it
  EXPECT_EQ(p.acquire(h[0], 0, t0), (*a)[0]);
}

TEST(BlockPool, HashChainDependsOnParentTokensAndSalt) {
  const auto t = toks(4);
  const uint64_t h = block_hash(0, t, 1);
  EXPECT_EQ(h, block_hash(0, t, 1));
  EXPECT_NE(h, block_hash(1, t, 1));
  EXPECT_NE(h, block_hash(0, t, 2));
  EXPECT_NE(h, block_hash(0, toks(4, 101), 1));
  EXPECT_NE(h, 0u);
}

KvSpec two_layer_spec(int window) {
  KvSpec s;
  s.layers.push_back(kv_layer_attention(2, 4, 4, 0));
  s.layers.push_back(kv_layer_attention(2, 4, 4, window));
  return s;
}

TEST(KvPool, BudgetBlocksAndPagedRows) {
  ThreadPool tp(1);
  CpuDevice dev(tp);
  const KvSpec spec = two_layer_spec(0);
  // A block of 4 positions: 4 parts x 8 floats x 4 B x 4 = 512 B.
  auto kp = KvPool::create(spec, dev, {.budget_bytes = 512 * 5 + 100, .block_size = 4});
  ASSERT_TRUE(kp.ok()) << kp.message();
  KvPool& pool = **kp;
  EXPECT_EQ(pool.n_blocks(), 5);
  EXPECT_EQ(pool.block_bytes(), 512u);
  EXPECT_EQ(dev.memory().allocated, 5u * 512u);
  EXPECT_TRUE(pool.prefix_cache());
  auto c = KvCache::paged(spec, 16, 4, pool);
  ASSERT_TRUE(c.ok()) << c.message();
  BlockTable& t = *c->blocks();
  EXPECT_EQ(t.max_blocks(), 4);
  EXPECT_EQ(c->bytes(), 0u);  // every part paged
  ASSERT_TRUE(pool.reserve(t, 6).ok());
  EXPECT_EQ(t.size(), 2);
  // Rows land at block base + offset; distinct positions never share a row.
  RowCache& k = c->layer(1).part(0);
  for (int64_t i = 0; i < 8; ++i) k.row(i)[0] = static_cast<float>(i);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(k.row(i)[0], static_cast<float>(i));
  EXPECT_EQ(k.view().slot(5), t.id(1) * 4 + 1);
  const DeviceRows dr = k.device_rows();
  EXPECT_EQ(dr.blocks, t.ids());
  EXPECT_EQ(dr.stored_rows, 20);
  // More than the pool holds: an error naming the need, nothing taken.
  auto c2 = KvCache::paged(spec, 64, 4, pool);
  ASSERT_TRUE(c2.ok());
  const Status s = pool.reserve(*c2->blocks(), 17);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("need 5 more blocks"), std::string::npos) << s.message();
  EXPECT_EQ(c2->blocks()->size(), 0);
  EXPECT_EQ(pool.available(), 3);
  c->release_blocks();
  EXPECT_EQ(pool.available(), 5);
  // No budget for one block.
  auto small = KvPool::create(spec, dev, {.budget_bytes = 100, .block_size = 4});
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.message().find("holds no KV block"), std::string::npos) << small.message();
}

TEST(KvPool, PrefixAdoptionSharesFullBlocksAndLeavesTheLastToken) {
  ThreadPool tp(1);
  CpuDevice dev(tp);
  const KvSpec spec = two_layer_spec(0);
  auto kp = KvPool::create(spec, dev, {.budget_bytes = 512 * 8, .block_size = 4});
  ASSERT_TRUE(kp.ok());
  KvPool& pool = **kp;
  const auto prompt = toks(10);
  BlockTable a = pool.new_table(32), b = pool.new_table(32), c = pool.new_table(32);
  EXPECT_EQ(pool.adopt_prefix(a, prompt), 0);
  ASSERT_TRUE(pool.reserve(a, 10).ok());
  pool.commit(a, prompt);  // blocks 0, 1 full
  EXPECT_EQ(a.n_hashed(), 2);
  EXPECT_EQ(pool.adopt_prefix(b, prompt), 8);
  EXPECT_EQ(b.id(0), a.id(0));
  EXPECT_EQ(b.id(1), a.id(1));
  EXPECT_EQ(pool.stats().blocks.shared, 2);
  // An 8-token prompt reuses one block: its last token is evaluated again.
  const std::vector<int32_t> eight(prompt.begin(), prompt.begin() + 8);
  EXPECT_EQ(pool.adopt_prefix(c, eight), 4);
  // A different second block: only the first is shared.
  std::vector<int32_t> diverged = prompt;
  diverged[5] = 7;
  BlockTable d = pool.new_table(32);
  EXPECT_EQ(pool.adopt_prefix(d, diverged), 4);
  // Fragmentation counts a's last block's two unused rows only (adopted blocks are held whole).
  EXPECT_EQ(pool.stats().unused_rows, 2);
  const double avg = pool.stats().fragmentation_avg;
  EXPECT_GE(avg, 0.0);
  EXPECT_LE(avg, 1.0);
  for (BlockTable* t : {&a, &b, &c, &d}) pool.release(*t);
  EXPECT_EQ(pool.stats().unused_rows, 0);
  EXPECT_EQ(pool.stats().blocks.used, 0);
  EXPECT_EQ(pool.stats().blocks.cached, 2);
  BlockTable e = pool.new_table(32);
  EXPECT_EQ(pool.adopt_prefix(e, prompt), 8);  // cached after every sequence let go
  EXPECT_EQ(pool.stats().unused_rows, 0);
  pool.release(e);
  EXPECT_EQ(pool.stats().unused_rows, 0);
}

TEST(KvPool, WindowPartsStayPerSequenceAndTurnThePrefixCacheOff) {
  ThreadPool tp(1);
  CpuDevice dev(tp);
  const KvSpec spec = two_layer_spec(4);
  auto kp = KvPool::create(spec, dev, {.budget_bytes = 1 << 16, .block_size = 4});
  ASSERT_TRUE(kp.ok());
  EXPECT_FALSE((*kp)->prefix_cache());
  EXPECT_TRUE((*kp)->pages(0, 0));
  EXPECT_FALSE((*kp)->pages(1, 0));
  auto c = KvCache::paged(spec, 64, 8, **kp);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->layer(1).part(0).paged());
  EXPECT_TRUE(c->layer(1).part(0).ring());
  EXPECT_EQ(c->bytes(), spec.layers[1].parts[0].bytes(KvType::f32, 64, 8) * 2);
  BlockTable t = (*kp)->new_table(64);
  EXPECT_EQ((*kp)->adopt_prefix(t, toks(20)), 0);
}

}  // namespace
}  // namespace strata
