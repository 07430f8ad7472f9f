#include "obs/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace strata {

SampleStats summarize(std::span<const double> samples) {
  SampleStats s;
  s.n = static_cast<int>(samples.size());
  if (s.n == 0) return s;
  std::vector<double> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = s.n % 2 ? v[s.n / 2] : 0.5 * (v[s.n / 2 - 1] + v[s.n / 2]);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / s.n;
  if (s.n > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(ss / (s.n - 1));
  }
  return s;
}

double nearest_rank(std::span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(k, 1, sorted.size()) - 1];
}

}  // namespace strata
