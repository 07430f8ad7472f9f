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

}  // namespace strata
