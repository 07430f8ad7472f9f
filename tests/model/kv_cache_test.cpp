// kv/: RowCache addressing (linear and ring) and KvCache layer layouts.
#include <gtest/gtest.h>

#include "kv/kv_cache.h"
#include "kv/row_cache.h"

namespace strata {
namespace {

TEST(KvCache, RingKeepsTheLastCapacityRows) {
  RowCache c(3, 5, /*ring=*/true);
  for (int64_t i = 0; i < 12; ++i)
    for (int j = 0; j < 3; ++j) c.row(i)[j] = static_cast<float>(i * 10 + j);
  for (int64_t i = 7; i < 12; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(c.row(i)[j], static_cast<float>(i * 10 + j));
  EXPECT_EQ(c.row(2), c.row(7));  // slot reuse
}

TEST(KvCache, BuiltFromTheSpecRingOrLinear) {
  KvSpec spec;
  spec.layers.push_back(kv_layer_attention(4, 8, 8, /*window=*/128));  // ring: 127 + 16
  spec.layers.push_back(kv_layer_attention(4, 8, 4, 0));               // full: linear
  spec.layers[1].parts.push_back(kv_part_every(KvPartKind::compressed, "comp", "c", 64, 4));
  spec.layers[1].parts.push_back(kv_part_state("comp_state", "s", 10, 8));
  const KvCache kv(spec, /*n_ctx=*/1024, /*n_batch=*/16);
  const KvLayer& l0 = kv.layer(0);
  const KvLayer& l1 = kv.layer(1);
  ASSERT_GE(l0.find("k"), 0);
  EXPECT_EQ(l0.find(KvPartKind::window), l0.find("k"));
  EXPECT_TRUE(l0.part(l0.find("k")).ring());
  EXPECT_EQ(l0.part(l0.find("k")).capacity(), 143);
  EXPECT_FALSE(l1.part(l1.find("v")).ring());
  EXPECT_EQ(l1.part(l1.find("v")).width(), 16);
  EXPECT_EQ(l1.part(l1.find(KvPartKind::compressed)).capacity(), 256);  // ceil(1024 / 4)
  EXPECT_EQ(l1.part(l1.find("comp_state")).capacity(), 8);
  EXPECT_EQ(l0.find(KvPartKind::compressed), -1);
  EXPECT_EQ(l0.find("nope"), -1);
  const size_t want = sizeof(float) * (2 * 32 * 143 + (32 + 16) * 1024 + 64 * 256 + 10 * 8);
  EXPECT_EQ(kv.bytes(), want);
  EXPECT_EQ(spec.bytes(1024, 16), want);  // the spec prices what the cache allocates
  EXPECT_EQ(spec.bytes(KvType::f16, 1024, 16), want / 2 + 10 * 8 * 2);  // state stays f32
  // A window wider than the context needs no ring; a window part costs nothing per token.
  const KvCache small(spec, 64, 64);
  EXPECT_FALSE(small.layer(0).part(0).ring());
  EXPECT_EQ(small.layer(0).part(0).capacity(), 64);
  EXPECT_EQ(spec.layers[0].parts[0].bytes_per_token(KvType::f32), 0.0);
  EXPECT_EQ(spec.layers[1].parts[2].bytes_per_token(KvType::f32), 64.0);  // 256 B per 4 positions
  // Token by token (V4.1's reference path) a window ring is exactly the window.
  KvPartSpec w = kv_part_window("window", "w", 8, 128);
  w.step_in_ring = false;
  EXPECT_EQ(w.rows(4096, 512), 128);
  EXPECT_EQ(w.rows(100, 512), 100);
}

}  // namespace
}  // namespace strata
