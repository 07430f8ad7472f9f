// The element-wise OpsTable (kernels/ops.h) per ISA against the scalar reference table: the
// vector expf within 2 ulp of std::exp over its whole range (and -inf, inf, NaN, subnormals),
// vec_add / vec_add_scaled / dot_f32 bit-identical, the exp-based ops within a few ulp, odd
// lengths (vector tails) and aliased outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernel_test_data.h"
#include "kernels/ops.h"

namespace strata {
namespace {

using kernel_test::gaussian;

using OpsSimd = kernel_test::IsaTest;

constexpr float kInf = std::numeric_limits<float>::infinity();
const int64_t kSizes[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 513, 1024};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// Distance in representable floats (+0 and -0 are the same point); NaN vs NaN is 0.
int64_t ulp_diff(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  auto ord = [](float f) {
    const uint32_t u = bits(f);
    return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7fffffffu) : static_cast<int64_t>(u);
  };
  const int64_t d = ord(a) - ord(b);
  return d < 0 ? -d : d;
}

// Runs t.exp over xs (odd batch length, so tails run too) and returns the largest ulp distance
// from std::exp; fails on the first value past max_ulp.
int64_t exp_max_ulp(const OpsTable& t, const std::vector<float>& xs, int64_t max_ulp) {
  std::vector<float> y(xs.size());
  t.exp(xs.data(), y.data(), static_cast<int64_t>(xs.size()));
  int64_t worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t d = ulp_diff(y[i], std::exp(xs[i]));
    if (d > max_ulp) {
      ADD_FAILURE() << "exp(" << xs[i] << ") = " << y[i] << ", std::exp " << std::exp(xs[i]) << " (" << d
                    << " ulp)";
      return d;
    }
    worst = std::max(worst, d);
  }
  return worst;
}

TEST_P(OpsSimd, ExpWithinTwoUlpOverTheWholeRange) {
  const OpsTable& t = ops_table(GetParam());
  int64_t worst = 0;
  // Every 251st float in [-104, 89] of both signs: ~9M inputs, normal and subnormal results.
  for (const uint32_t sign : {0u, 0x80000000u}) {
    const uint32_t top = sign ? bits(104.0f) : bits(89.0f);
    std::vector<float> xs;
    for (uint32_t u = 0; u <= top; u += 251) {
      xs.push_back(from_bits(u | sign));
      if (xs.size() == 8191) {
        worst = std::max(worst, exp_max_ulp(t, xs, 2));
        xs.clear();
      }
    }
    worst = std::max(worst, exp_max_ulp(t, xs, 2));
  }
  // Consecutive floats at the edges: overflow (88.72), first subnormal (-87.34), underflow to 0
  // (-103.97), around 0.
  for (const float c : {88.7228f, -87.3365f, -103.972f, 0.0f, 1.0f, -1.0f, 0.34657f}) {
    std::vector<float> xs;
    uint32_t u = bits(c);
    for (int i = -4000; i < 4001; ++i) xs.push_back(from_bits(u + static_cast<uint32_t>(i)));
    worst = std::max(worst, exp_max_ulp(t, xs, 2));
  }
  std::printf("[ exp %s ] max %lld ulp vs std::exp\n", isa_name(GetParam()), static_cast<long long>(worst));
}

TEST_P(OpsSimd, ExpSpecialValues) {
  const OpsTable& t = ops_table(GetParam());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {-kInf, kInf,  nan,   89.0f, 88.73f, 1e30f,  -1e30f,   -104.0f, -200.0f,
                                 0.0f,  -0.0f, -kInf, kInf,  nan,    100.0f, -103.98f, -87.0f};
  std::vector<float> y(xs.size());
  t.exp(xs.data(), y.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    const float want = std::exp(xs[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << xs[i];
    } else if (want == 0.0f || std::isinf(want) || want == 1.0f) {
      EXPECT_EQ(bits(y[i]), bits(want)) << "exp(" << xs[i] << ") = " << y[i];
    } else {
      EXPECT_LE(ulp_diff(y[i], want), 2) << xs[i];
    }
  }
}

TEST_P(OpsSimd, VecAddAndDotAreBitIdentical) {
  const OpsTable& t = ops_table(GetParam());
  const OpsTable& r = ops_table(Isa::scalar);
  for (const int64_t n : kSizes) {
    const std::vector<float> x = gaussian(n, 7), y0 = gaussian(n, 4);
    std::vector<float> a = y0, b = y0;
    t.vec_add(a.data(), x.data(), n);
    r.vec_add(b.data(), x.data(), n);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * n)) << "vec_add n=" << n;
    a = y0, b = y0;
    t.vec_add(a.data(), a.data(), n);  // y == x
    r.vec_add(b.data(), b.data(), n);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * n)) << "vec_add aliased n=" << n;
    a = y0, b = y0;
    t.vec_add_scaled(a.data(), x.data(), 0.37f, n);
    r.vec_add_scaled(b.data(), x.data(), 0.37f, n);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * n)) << "vec_add_scaled n=" << n;
    a = y0, b = y0;
    t.vec_add_scaled(a.data(), a.data(), -1.3f, n);
    r.vec_add_scaled(b.data(), b.data(), -1.3f, n);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * n)) << "vec_add_scaled aliased n=" << n;
    ASSERT_EQ(bits(t.dot_f32(x.data(), y0.data(), n)), bits(r.dot_f32(x.data(), y0.data(), n)))
        << "dot n=" << n;
    ASSERT_EQ(bits(t.dot_f32(x.data(), x.data(), n)), bits(r.dot_f32(x.data(), x.data(), n)))
        << "dot n=" << n;
  }
}

TEST_P(OpsSimd, RowFormsAreBitIdenticalToTheLoops) {
  const OpsTable& t = ops_table(GetParam());
  const OpsTable& r = ops_table(Isa::scalar);
  for (const int64_t n : {1, 7, 8, 13, 32, 33, 64, 72, 128, 200}) {
    for (const int64_t nk : {1, 3, 4, 5, 8, 11, 64}) {
      // Rows at scattered addresses inside one pool (as a ring-buffer cache hands them out).
      const std::vector<float> pool = gaussian((nk + 3) * n, 21), q = gaussian(n, 22), y0 = gaussian(n, 23);
      std::vector<const float*> rows(nk);
      for (int64_t j = 0; j < nk; ++j) rows[j] = pool.data() + ((j * 5) % (nk + 3)) * n;
      const std::vector<float> s = gaussian(nk, 24);
      std::vector<float> a(nk), b(nk);
      t.dot_f32_rows(q.data(), rows.data(), nk, n, a.data());
      for (int64_t j = 0; j < nk; ++j) b[j] = r.dot_f32(q.data(), rows[j], n);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * nk))
          << "dot_f32_rows n=" << n << " nk=" << nk;
      std::vector<float> ya = y0, yb = y0;
      t.vec_add_scaled_rows(ya.data(), rows.data(), s.data(), nk, n);
      for (int64_t j = 0; j < nk; ++j) r.vec_add_scaled(yb.data(), rows[j], s[j], n);
      ASSERT_EQ(0, std::memcmp(ya.data(), yb.data(), sizeof(float) * n))
          << "vec_add_scaled_rows n=" << n << " nk=" << nk;
    }
  }
}

TEST_P(OpsSimd, RopeIsBitIdentical) {
  const OpsTable& t = ops_table(GetParam());
  const OpsTable& r = ops_table(Isa::scalar);
  for (const RopeStyle style : {RopeStyle::rope_style_neox, RopeStyle::rope_style_norm}) {
    for (const int n_rot : {2, 6, 8, 14, 16, 18, 32, 34, 64, 128}) {
      RopeParams p;
      p.n_rot = n_rot;
      std::vector<float> cache(n_rot);
      rope_cache(p, 37, 1.0f, cache.data());
      const std::vector<float> x = gaussian(n_rot + 5, 25);  // a tail past n_rot stays untouched
      std::vector<float> a = x, b = x;
      t.rope_apply(style, n_rot, cache.data(), a.data());
      r.rope_apply(style, n_rot, cache.data(), b.data());
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * a.size()))
          << (style == RopeStyle::rope_style_neox ? "neox" : "norm") << " n_rot=" << n_rot;
    }
  }
}

// |a − b| within k ulp of b (or both NaN, or equal infinities).
void expect_close(const std::vector<float>& a, const std::vector<float>& b, int64_t k,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_LE(ulp_diff(a[i], b[i]), k) << what << " [" << i << "]: " << a[i] << " vs scalar " << b[i];
}

TEST_P(OpsSimd, RmsNormMatchesScalar) {
  const OpsTable& t = ops_table(GetParam());
  const OpsTable& r = ops_table(Isa::scalar);
  for (const int64_t n : kSizes) {
    const std::vector<float> x = gaussian(n, 10), w = gaussian(n, 2);
    for (const float* wp : {w.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> a(n), b(n);
      t.rms_norm(x.data(), wp, a.data(), n, 1e-6f);
      r.rms_norm(x.data(), wp, b.data(), n, 1e-6f);
      expect_close(a, b, 1, "rms_norm n=" + std::to_string(n));
      a = x;
      t.rms_norm(a.data(), wp, a.data(), n, 1e-6f);  // y == x
      expect_close(a, b, 1, "rms_norm aliased n=" + std::to_string(n));
    }
  }
}

// Gate values that reach the exp's overflow and underflow, NaN and infinities.
std::vector<float> gate_values(int64_t n, uint32_t seed) {
  std::vector<float> g = gaussian(n, seed);
  for (int64_t i = 0; i < n; ++i) {
    if (i % 11 == 3) g[i] *= 40.0f;  // |g| up to ~150: e^-g overflows or underflows
    if (i % 97 == 5) g[i] = -kInf;
    if (i % 89 == 6) g[i] = kInf;
    if (i % 101 == 7) g[i] = std::numeric_limits<float>::quiet_NaN();
  }
  return g;
}

TEST_P(OpsSimd, SwigluFamilyMatchesScalar) {
  const OpsTable& t = ops_table(GetParam());
  const OpsTable& r = ops_table(Isa::scalar);
  for (const int64_t n : kSizes) {
    const std::vector<float> g = gate_values(n, 12), u = gaussian(n, 13);
    const std::string sz = " n=" + std::to_string(n);
    std::vector<float> a(n), b(n);
    t.swiglu(g.data(), u.data(), a.data(), n);
    r.swiglu(g.data(), u.data(), b.data(), n);
    expect_close(a, b, 3, "swiglu" + sz);
    a = g;
    t.swiglu(a.data(), u.data(), a.data(), n);  // out == g
    expect_close(a, b, 3, "swiglu out==g" + sz);
    a = u;
    t.swiglu(g.data(), a.data(), a.data(), n);  // out == u
    expect_close(a, b, 3, "swiglu out==u" + sz);

    r.swiglu_oai(g.data(), u.data(), b.data(), n, 1.702f, 7.0f);
    a = g;
    t.swiglu_oai(a.data(), u.data(), a.data(), n, 1.702f, 7.0f);
    expect_close(a, b, 3, "swiglu_oai" + sz);

    r.swiglu_clamped(g.data(), u.data(), b.data(), n, 10.0f);
    a = g;
    t.swiglu_clamped(a.data(), u.data(), a.data(), n, 10.0f);
    expect_close(a, b, 3, "swiglu_clamped" + sz);
  }
}

TEST_P(OpsSimd, SoftmaxMatchesScalarAndMasksExactly) {
  const OpsTable& t = ops_table(GetParam());
  const OpsTable& r = ops_table(Isa::scalar);
  for (const int64_t n : kSizes) {
    const std::vector<float> x0 = gaussian(n, 16);
    std::vector<float> mask(n, 0.0f);
    for (int64_t i = 0; i < n; ++i)
      if (i % 3 == 1) mask[i] = -kInf;  // i = 0 stays visible
    const float sink = 0.7f;
    const std::string sz = " n=" + std::to_string(n);
    for (int variant = 0; variant < 3; ++variant) {
      const float* m = variant >= 1 ? mask.data() : nullptr;
      const float* s = variant == 2 ? &sink : nullptr;
      std::vector<float> a = x0, b = x0;
      t.softmax_scaled(a.data(), n, 0.125f, m, s);
      r.softmax_scaled(b.data(), n, 0.125f, m, s);
      expect_close(a, b, 4, "softmax variant " + std::to_string(variant) + sz);
      for (int64_t i = 0; m && i < n; ++i) {
        if (i % 3 == 1) {
          ASSERT_EQ(bits(a[i]), 0u) << "masked entry " << i << sz;
        }
      }
    }
  }
}

TEST_P(OpsSimd, SoftmaxAllMaskedWithSinkGivesZeros) {
  const OpsTable& t = ops_table(GetParam());
  for (const int64_t n : kSizes) {
    std::vector<float> x = gaussian(n, 17), mask(n, -kInf);
    const float sink = 2.0f;
    t.softmax_scaled(x.data(), n, 1.0f, mask.data(), &sink);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bits(x[i]), 0u) << i << " n=" << n;
  }
}

TEST_P(OpsSimd, ExpShiftSumMatchesScalar) {
  const OpsTable& t = ops_table(GetParam());
  const OpsTable& r = ops_table(Isa::scalar);
  for (const int64_t n : kSizes) {
    std::vector<float> a = gaussian(n, 18), b = a;
    for (auto& v : a) v *= 4.0f;
    b = a;
    const float sa = t.exp_shift_sum(a.data(), n, 3.0f);
    const float sb = r.exp_shift_sum(b.data(), n, 3.0f);
    expect_close(a, b, 2, "exp_shift_sum n=" + std::to_string(n));
    // Both sums in f32, in different orders: within n rounding steps (plus the exps' 2 ulp) of
    // the exact sum of the scalar exps.
    double exact = 0.0;
    for (const float v : b) exact += v;
    EXPECT_NEAR(sa, exact, (n + 2) * 1.2e-7 * exact) << n;
    EXPECT_NEAR(sb, exact, (n + 2) * 1.2e-7 * exact) << n;
  }
}

// The public functions go through the active ISA's table.
TEST(OpsDispatch, PublicFunctionsUseTheActiveTable) {
  EXPECT_EQ(ops_table().isa, active_isa());
  const std::vector<float> x = gaussian(37, 3), y0 = gaussian(37, 5);
  std::vector<float> a = y0, b = y0;
  vec_add_scaled(a.data(), x.data(), 0.5f, 37);
  ops_table().vec_add_scaled(b.data(), x.data(), 0.5f, 37);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * 37));
}

INSTANTIATE_TEST_SUITE_P(Isa, OpsSimd, ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(isa_name(i.param));
                         });

}  // namespace
}  // namespace strata
