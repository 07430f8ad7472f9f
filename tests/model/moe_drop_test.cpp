// The fast profile's expert drop (model/blocks/moe.h moe_drop_light_choices): choices weighing
// less than a share of a token's mean choice go (sel -1, weight 0), the heaviest always stays,
// the kept weights are rescaled to the routing's total, and rows without a share are untouched.
#include <gtest/gtest.h>

#include <vector>

#include "model/blocks/moe.h"

namespace strata {
namespace {

TEST(MoeDrop, DropsLightChoicesKeepsTheHeaviestAndTheTotal) {
  constexpr int K = 4;
  // row 0: share 0.5 of mean 0.25 -> tau 0.125: drops 0.1 and 0.05
  // row 1: no share: untouched
  // row 2: every choice below tau except the heaviest (not in slot 0)
  std::vector<int32_t> sel = {3, 1, 7, 2, 3, 1, 7, 2, 5, 6, 0, 4};
  std::vector<float> w = {0.5f, 0.35f, 0.1f, 0.05f, 0.5f, 0.35f, 0.1f, 0.05f, 0.01f, 0.02f, 0.9f, 0.07f};
  const std::vector<float> share = {0.5f, 0.0f, 1.0f};
  moe_drop_light_choices(share.data(), 3, K, sel.data(), w.data());
  EXPECT_EQ(sel[0], 3);
  EXPECT_EQ(sel[1], 1);
  EXPECT_EQ(sel[2], -1);
  EXPECT_EQ(sel[3], -1);
  EXPECT_FLOAT_EQ(w[0] + w[1], 1.0f);
  EXPECT_FLOAT_EQ(w[0] / w[1], 0.5f / 0.35f);
  EXPECT_EQ(w[2], 0.0f);
  EXPECT_EQ(w[3], 0.0f);
  const std::vector<int32_t> row1 = {3, 1, 7, 2};
  const std::vector<float> w1 = {0.5f, 0.35f, 0.1f, 0.05f};
  for (int j = 0; j < K; ++j) {
    EXPECT_EQ(sel[K + j], row1[j]);
    EXPECT_EQ(w[K + j], w1[j]);  // bit for bit
  }
  EXPECT_EQ(sel[8], -1);
  EXPECT_EQ(sel[9], -1);
  EXPECT_EQ(sel[10], 0);
  EXPECT_EQ(sel[11], -1);
  EXPECT_FLOAT_EQ(w[10], 1.0f);
}

TEST(MoeDrop, NothingBelowTheShareChangesNoBit) {
  constexpr int K = 2;
  std::vector<int32_t> sel = {4, 9};
  std::vector<float> w = {0.6f, 0.4f};  // tau = 0.5 * 0.5 = 0.25
  const float share = 0.5f;
  moe_drop_light_choices(&share, 1, K, sel.data(), w.data());
  EXPECT_EQ(sel[0], 4);
  EXPECT_EQ(sel[1], 9);
  EXPECT_EQ(w[0], 0.6f);
  EXPECT_EQ(w[1], 0.4f);
}

}  // namespace
}  // namespace strata
