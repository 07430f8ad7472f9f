// PrefillPacer: the prompt chunk beside decoding sequences, from injected turn times (a synthetic
// cost curve: a decode-only turn of 1 ms, a chunk of k tokens adding f + c*k ms).
#include "runtime/prefill_pacer.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

constexpr double kMs = 1e-3;

// Runs n mixed turns on the curve excess(k) = f + c*k (in decode turns of 1 ms), with a decode-only
// turn every 8th; with stretch > 0, every 5th mixed turn takes that many ms more. Returns the chunks.
std::vector<int> drive(PrefillPacer& p, double f, double c, int n, double stretch = 0) {
  std::vector<int> ks;
  p.observe_decode(1 * kMs);
  for (int i = 1; i <= n; ++i) {
    if (i % 8 == 0) {
      p.observe_decode(1 * kMs);
      continue;
    }
    const double extra = stretch > 0 && i % 5 == 0 ? stretch : 0;
    const int k = p.chunk(2044);
    ks.push_back(k);
    p.observe_mixed(k, (1 + f + c * k + extra) * kMs);
  }
  return ks;
}

// The largest k whose turn stays within the target on the curve.
int best_k(double target, double f, double c) {
  return static_cast<int>((target - 1 - f) / c);
}

TEST(PrefillPacer, StartsSmallThenConvergesBelowTheTarget) {
  PrefillPacer p;
  p.target = 1.8;
  EXPECT_EQ(p.chunk(2044), PrefillPacer::kFirst);  // nothing measured
  EXPECT_EQ(p.chunk(5), 5);                        // never more than the room
  const auto ks = drive(p, 0.2, 0.01, 200);
  const int best = best_k(1.8, 0.2, 0.01);  // 60
  for (int k : ks) EXPECT_LE(1 + 0.2 + 0.01 * k, 1.8 * 2 + 1e-9) << "an exploring turn overshot 2x target";
  int over = 0;
  for (int k : ks) over += k > best ? 1 : 0;
  EXPECT_LE(over, 3) << "turns over the target after exploring";
  EXPECT_GE(ks.back(), best * 8 / 10);
  EXPECT_LE(ks.back(), best);
}

TEST(PrefillPacer, AFixedCostDoesNotCollapseTheChunk) {
  // One prompt token already costs 0.7 decode turns (a new sequence's experts): a per-token rate
  // from the first chunk (16 tokens: 0.78) would allow 20 tokens; the curve allows
  // (2 - 1 - 0.7) / 0.005 = 60.
  PrefillPacer p;
  p.target = 2.0;
  const auto ks = drive(p, 0.7, 0.005, 200);
  EXPECT_GE(ks.back(), 50);
  EXPECT_LE(ks.back(), best_k(2.0, 0.7, 0.005));
}

TEST(PrefillPacer, StretchedTurnsDoNotShrinkTheChunk) {
  // Every 5th mixed turn takes 10 ms more (a preempted core, not the chunk's cost; the decode-only
  // probes happen to miss them): a plain EMA of the excess would shrink the chunk to 1.
  PrefillPacer p;
  p.target = 2.5;
  const auto ks = drive(p, 0.3, 0.01, 400, 10);
  const int best = best_k(2.5, 0.3, 0.01);  // 120
  EXPECT_GE(ks.back(), best * 7 / 10);
  EXPECT_LE(ks.back(), best * 12 / 10);
}

TEST(PrefillPacer, AStretchedFirstChunkIsMeasuredAgain) {
  // The first 16-token turn is stretched to 10 decode turns (cold pages): smaller chunks follow, and
  // after kForget turns the larger bucket is explored again.
  PrefillPacer p;
  p.target = 1.8;
  p.observe_decode(1 * kMs);
  p.observe_mixed(p.chunk(2044), 10 * kMs);
  const auto ks = drive(p, 0.2, 0.01, 300);
  EXPECT_GE(ks.back(), best_k(1.8, 0.2, 0.01) * 8 / 10);
  EXPECT_LE(ks.back(), best_k(1.8, 0.2, 0.01));
}

TEST(PrefillPacer, ASmallerChunkIsPredictedNoDearerThanALargerOne) {
  // Noise on a flat curve (all experts read once from a few tokens up) would otherwise ratchet the
  // chunk down bucket by bucket.
  PrefillPacer p;
  p.observe_decode(1 * kMs);
  p.observe_mixed(8, 2.6 * kMs);
  p.observe_mixed(32, 2.4 * kMs);
  EXPECT_NEAR(p.predicted_excess(8), 1.4, 1e-9);
  EXPECT_NEAR(p.predicted_excess(16), 1.4, 1e-9);
  EXPECT_EQ(p.chunk(2044), 64);  // with target 2.5: one doubling beyond the largest measured
}

TEST(PrefillPacer, FollowsAGrowingCost) {
  // The prompt's attention grows with its position: the same chunk costs more later.
  PrefillPacer p;
  p.target = 2.0;
  drive(p, 0.1, 0.01, 200);
  const int before = p.chunk(2044);
  const auto ks = drive(p, 0.1, 0.03, 200);
  EXPECT_GT(before, 60);
  EXPECT_LE(ks.back(), best_k(2.0, 0.1, 0.03));  // 30
  EXPECT_GE(ks.back(), best_k(2.0, 0.1, 0.03) * 7 / 10);
}

TEST(PrefillPacer, IgnoresTurnsBeforeADecodeStepIsKnown) {
  PrefillPacer p;
  p.observe_mixed(16, 5 * kMs);  // no decode-only turn yet: no reference
  EXPECT_LT(p.predicted_excess(16), 0);
  EXPECT_EQ(p.chunk(100), PrefillPacer::kFirst);
  p.observe_decode(1 * kMs);
  p.observe_mixed(16, 2 * kMs);
  EXPECT_DOUBLE_EQ(p.predicted_excess(16), 1.0);
  EXPECT_DOUBLE_EQ(p.predicted_excess(8), 1.0);   // below the smallest measured: no less
  EXPECT_DOUBLE_EQ(p.predicted_excess(32), 1.5);  // one point: half of it taken as fixed
}

}  // namespace
}  // namespace strata
