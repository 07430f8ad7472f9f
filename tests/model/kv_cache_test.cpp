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

TEST(KvCache, StandardLayersPickRingOrLinear) {
  KvCache kv(2);
  kv.add_standard_layer(0, 32, 32, /*n_ctx=*/1024, /*window=*/128, /*n_batch=*/16);  // ring: 127 + 16
  kv.add_standard_layer(1, 32, 16, 1024, 0, 16);                                     // full: linear
  const KvLayer& l0 = kv.layer(0);
  const KvLayer& l1 = kv.layer(1);
  ASSERT_GE(l0.find(KvPartKind::kv_part_k), 0);
  EXPECT_TRUE(l0.part(l0.find(KvPartKind::kv_part_k)).ring());
  EXPECT_EQ(l0.part(l0.find(KvPartKind::kv_part_k)).capacity(), 143);
  EXPECT_FALSE(l1.part(l1.find(KvPartKind::kv_part_v)).ring());
  EXPECT_EQ(l1.part(l1.find(KvPartKind::kv_part_v)).width(), 16);
  EXPECT_EQ(l1.find(KvPartKind::kv_part_compressed), -1);
  EXPECT_EQ(kv.bytes(), sizeof(float) * (2 * 32 * 143 + (32 + 16) * 1024));
  // A window wider than the context needs no ring.
  KvCache small(1);
  small.add_standard_layer(0, 8, 8, 64, 128, 64);
  EXPECT_FALSE(small.layer(0).part(0).ring());
  // Architectures add their own parts.
  const int p = small.layer(0).add_part(KvPartKind::kv_part_compressed, "comp", 64, 4, false);
  EXPECT_EQ(small.layer(0).find(KvPartKind::kv_part_compressed), p);
}

}  // namespace
}  // namespace strata
