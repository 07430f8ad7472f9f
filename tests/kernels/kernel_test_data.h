// Shared inputs and bounds of the kernel tests (tiles, panels, gemv): seeded Gaussian rows,
// the Σ|w·x| scale their tolerances are relative to, and a fixture parameterised by ISA that
// skips ISAs the CPU lacks.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "quant/quant_ref.h"

namespace strata::kernel_test {

// n N(0, scale²) values from seed.
inline std::vector<float> normal(size_t n, uint32_t seed, float scale) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// n N(0, 1) values from seed; seeds ≡ 1 (mod 3) mix in zero blocks and large magnitudes.
inline std::vector<float> gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  if (seed % 3 == 1)  // a zero block and large magnitudes mixed in
    for (int64_t i = 0; i < n; ++i) v[i] = (i / 32) % 4 == 1 ? 0.0f : v[i] * (i % 2 ? 100.0f : 1.0f);
  return v;
}

// Σ|w_i·x_i| over the dequantized rows: the scale f32 summation-order error is bounded by.
inline double abs_dot(GgmlType wt, const uint8_t* w, GgmlType xt, const uint8_t* x, int64_t n) {
  std::vector<float> wf(static_cast<size_t>(n)), xf(static_cast<size_t>(n));
  quant_ref(wt)->to_float(w, wf.data(), n);
  quant_ref(xt)->to_float(x, xf.data(), n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(double(wf[i]) * xf[i]);
  return s;
}

// TEST_P fixtures over Isa values: skips an ISA the CPU lacks.
class IsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
  }
};

}  // namespace strata::kernel_test
