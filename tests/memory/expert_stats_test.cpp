// Expert statistics stay bounded: a ring of the last kStepRing steps plus cumulative totals that
// still count every step (all steps, and decode steps alone).
#include <gtest/gtest.h>

#include "memory/experts/expert_stats.h"

namespace strata {
namespace {

TEST(ExpertStats, StepRingIsBoundedAndTotalsStayExact) {
  ExpertStats s;
  s.init(2, 4);
  const int n = static_cast<int>(ExpertStats::kStepRing) + 904;
  s.begin_step(0, 7);  // a prompt step: not a decode step
  s.current()->hits = 5;
  for (int i = 0; i < n; ++i) {
    ExpertStepStats& p = s.begin_step(7 + i, 1);
    p.hits = 2;
    p.misses = 1;
    p.bytes_read = 100;
    p.stall_s = 0.001;
  }
  EXPECT_EQ(s.totals().steps, n + 1);
  EXPECT_EQ(s.totals().tokens, n + 7);
  const std::vector<ExpertStepStats> kept = s.steps();
  ASSERT_EQ(kept.size(), ExpertStats::kStepRing);
  EXPECT_EQ(s.steps_dropped(), 905u);
  EXPECT_EQ(kept.front().token0, 7 + 904);  // oldest kept first
  EXPECT_EQ(kept.back().token0, 7 + n - 1);
  const ExpertTotals d = s.decode_totals();
  EXPECT_EQ(d.tokens, n);
  EXPECT_EQ(d.hits, 2u * n);
  EXPECT_EQ(d.misses, 1u * n);
  EXPECT_EQ(d.bytes_read, 100u * n);
  EXPECT_NEAR(d.stall_s, 0.001 * n, 1e-9 * n);
  // The JSON holds the ring, not every step.
  const std::string j = s.to_json(ExpertStoreInfo{});
  EXPECT_NE(j.find("\"steps_dropped\": 905"), std::string::npos);
  EXPECT_LT(j.size(), 200u * ExpertStats::kStepRing);
}

}  // namespace
}  // namespace strata
