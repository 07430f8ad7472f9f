// LatencyHistogram: nearest-rank percentiles over the recent window, cumulative Prometheus buckets.
#include "obs/latency_histogram.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace strata {
namespace {

TEST(LatencyHistogram, NearestRankPercentiles) {
  LatencyHistogram h;
  EXPECT_EQ(h.percentile(0.5), 0.0);
  for (int i = 100; i >= 1; --i) h.add(i * 0.001);  // 1..100 ms, in reverse
  EXPECT_EQ(h.count(), 100u);
  EXPECT_NEAR(h.sum(), 5.050, 1e-9);
  EXPECT_DOUBLE_EQ(h.percentile(0.5), 0.050);
  EXPECT_DOUBLE_EQ(h.percentile(0.99), 0.099);
  EXPECT_DOUBLE_EQ(h.percentile(1.0), 0.100);
  EXPECT_DOUBLE_EQ(h.percentile(0.0), 0.001);
  EXPECT_DOUBLE_EQ(h.percentile(0.901), 0.091);  // ceil(90.1) = 91st smallest
}

TEST(LatencyHistogram, PercentilesCoverOnlyTheRecentWindow) {
  LatencyHistogram h;
  for (size_t i = 0; i < LatencyHistogram::kWindow; ++i) h.add(10.0);
  for (size_t i = 0; i < LatencyHistogram::kWindow; ++i) h.add(0.5);  // evicts every 10 s sample
  EXPECT_DOUBLE_EQ(h.percentile(1.0), 0.5);
  EXPECT_EQ(h.count(), 2 * LatencyHistogram::kWindow);  // the counts keep everything
}

TEST(LatencyHistogram, PrometheusBucketsAreCumulative) {
  LatencyHistogram h({0.1, 1.0});
  h.add(0.05);
  h.add(0.1);  // le is inclusive
  h.add(0.5);
  h.add(5.0);
  h.add(-1);  // clamps to 0
  std::string out;
  h.prometheus("x_seconds", "help text", &out);
  EXPECT_NE(out.find("# TYPE x_seconds histogram\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{le=\"0.1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{le=\"1\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{le=\"+Inf\"} 5\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_count 5\n"), std::string::npos) << out;
  const size_t at = out.find("x_seconds_sum ");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_DOUBLE_EQ(std::strtod(out.c_str() + at + 14, nullptr), 0.05 + 0.1 + 0.5 + 5.0);
}

TEST(LatencyHistogram, ScalarLines) {
  std::string out;
  prometheus_scalar("n_total", "counter", "things", 3, &out);
  EXPECT_EQ(out, "# HELP n_total things\n# TYPE n_total counter\nn_total 3\n");
}

}  // namespace
}  // namespace strata
