// RoPE / YaRN for DeepSeek-V4 vs double-precision formulas (deepseek-v4.md §2.3.6).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/deepseek4/ds4_rope.h"
#include "model/ds4_test_util.h"

namespace strata::ds4 {
namespace {

using testing::randn;

// YaRN angle from the doc: f_i = base^(-2i/n); f'_i = f_i/factor*(1-r_i) + f_i*r_i,
// r_i = 1 - clamp((i-low)/(high-low), 0, 1).
double ref_theta(double pos, int i, int n_rot, double base, double factor, double low, double high,
                 bool yarn) {
  const double f = std::pow(base, -2.0 * i / n_rot);
  if (!yarn) return pos * f;
  const double r = 1.0 - std::min(1.0, std::max(0.0, (i - low) / std::max(0.001, high - low)));
  return pos * (f / factor * (1.0 - r) + f * r);
}

TEST(Ds4Rope, YarnCorrectionDimsOfV4Flash) {
  // doc §2.3.6: dim 64, base 160000, orig 65536, beta 32/1 -> low 15, high 25
  RopeParams p = rope_yarn(64, 160000.0f, 16.0f, 65536);
  float dims[2];
  rope_yarn_corr_dims(p, dims);
  EXPECT_EQ(dims[0], 15.0f);
  EXPECT_EQ(dims[1], 25.0f);
  // closed form c(b) = n*ln(orig/(2*pi*b))/(2*ln base)
  const double c32 = 64 * std::log(65536 / (2 * M_PI * 32)) / (2 * std::log(160000.0));
  const double c1 = 64 * std::log(65536 / (2 * M_PI * 1)) / (2 * std::log(160000.0));
  EXPECT_EQ(dims[0], std::floor(c32));
  EXPECT_EQ(dims[1], std::ceil(c1));
}

TEST(Ds4Rope, MagnitudeIsCancelledUnderYarn) {
  RopeParams p = rope_yarn(64, 160000.0f, 16.0f, 65536);
  std::vector<float> cs(64);
  rope_cache(p, 12345, 1.0f, cs.data());
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(std::hypot(cs[2 * i], cs[2 * i + 1]), 1.0, 1e-6) << i;
}

struct RopeCase {
  bool yarn;
  int n_rot, row_len;
  int64_t pos;
};
class Ds4RopeRows : public ::testing::TestWithParam<RopeCase> {};

TEST_P(Ds4RopeRows, RotatesLastDimsAdjacentPairsLikeTheFormula) {
  const RopeCase c = GetParam();
  RopeParams p = c.yarn ? rope_yarn(c.n_rot, 160000.0f, 16.0f, 65536) : rope_plain(c.n_rot, 10000.0f);
  float dims[2] = {0, 0};
  if (c.yarn) rope_yarn_corr_dims(p, dims);
  const int rows = 3;
  auto x = randn(size_t(rows) * c.row_len, 21);
  auto y = x;
  rope_rows(p, c.pos, y.data(), rows, c.row_len, false);
  const int off = c.row_len - c.n_rot;
  // f32 angle accumulation (theta *= s) drifts by ~pos * 1e-7 relative: tolerance scales with pos
  const double tol = 2e-6 * std::max<double>(1.0, double(c.pos)) + 1e-5;
  for (int r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * c.row_len;
    const float* yr = y.data() + r * c.row_len;
    for (int i = 0; i < off; ++i) EXPECT_EQ(yr[i], xr[i]);  // nope dims untouched
    for (int i = 0; i < c.n_rot / 2; ++i) {
      const double th =
          ref_theta(double(c.pos), i, c.n_rot, c.yarn ? 160000.0 : 10000.0, 16.0, dims[0], dims[1], c.yarn);
      const double x0 = xr[off + 2 * i], x1 = xr[off + 2 * i + 1];
      EXPECT_NEAR(yr[off + 2 * i], x0 * std::cos(th) - x1 * std::sin(th), tol) << "pair " << i;
      EXPECT_NEAR(yr[off + 2 * i + 1], x0 * std::sin(th) + x1 * std::cos(th), tol) << "pair " << i;
    }
  }
  // inverse rotation (the attention-output de-rope) undoes it
  rope_rows(p, c.pos, y.data(), rows, c.row_len, true);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cases, Ds4RopeRows,
                         ::testing::Values(RopeCase{false, 16, 64, 7}, RopeCase{true, 16, 64, 300},
                                           RopeCase{true, 64, 512, 4096}, RopeCase{false, 64, 512, 100},
                                           RopeCase{true, 16, 16, 0}));

}  // namespace
}  // namespace strata::ds4
