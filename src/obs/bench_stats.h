// Summary statistics of repeated measurements (strata bench, kernel benchmarks): the median is
// the headline number (robust on a shared, noisy machine); spread says how much to trust it.
#pragma once

#include <span>

namespace strata {

struct SampleStats {
  int n = 0;
  double median = 0, mean = 0;
  double stddev = 0;  // sample standard deviation (0 for n < 2)
  double min = 0, max = 0;
};

// Empty input gives all zeros.
SampleStats summarize(std::span<const double> samples);

// Nearest-rank percentile of ascending `sorted` (q in [0, 1]): the smallest sample with at least
// q of the samples at or below it; 0 when empty. Latency reports (P50/P95/P99) use it.
double nearest_rank(std::span<const double> sorted, double q);

}  // namespace strata
