// Helpers for the DeepSeek-V4 block tests: seeded random data and tolerant comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace strata::ds4::testing {

inline std::vector<float> randn(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// max |a - b| / max(1, |b|) over n values
inline double max_rel_err(const float* a, const double* b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::fabs(b[i]));
    m = std::max(m, d);
  }
  return m;
}

}  // namespace strata::ds4::testing
