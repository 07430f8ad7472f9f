// Parity of every SIMD kernel with quant/'s scalar reference, per type × ISA × shape.
// Error limits: conversions and quantizers bit-exact; K-quant dot products bit-exact (integer
// super-block sums, same f32 scaling); other dot products |Δ| ≤ 1e-5 · Σ|w_i·x_i| (f32 lanes
// vs the reference's order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/traits.h"

namespace strata {
namespace {

const GgmlType kWeightTypes[] = {GgmlType::f32,   GgmlType::f16,  GgmlType::bf16,
                                 GgmlType::q8_0,  GgmlType::q4_0, GgmlType::mxfp4,
                                 GgmlType::nvfp4, GgmlType::q4_k, GgmlType::q6_k};
const GgmlType kAllTypes[] = {GgmlType::f32,  GgmlType::f16,   GgmlType::bf16,  GgmlType::q8_0,
                              GgmlType::q4_0, GgmlType::mxfp4, GgmlType::nvfp4, GgmlType::q4_k,
                              GgmlType::q6_k, GgmlType::q8_k};

// Activation-like data with the hard cases mixed in: exact ties after scaling, repeated
// ±max, all-zero blocks, tiny and large magnitudes.
std::vector<float> test_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  const int64_t kind = seed % 5;
  for (int64_t i = 0; i < n; ++i) {
    if (kind == 1) v[i] = static_cast<float>(static_cast<int>(v[i] * 40)) * 0.5f;  // halves: ties
    if (kind == 2 && (i / 32) % 3 == 1) v[i] = 0.0f;                               // zero blocks
    if (kind == 3) v[i] *= (i % 64 < 32) ? 1e-3f : 1e3f;
  }
  if (kind == 4 && n >= 2) {  // ±max at once: Q8_K takes the first one's sign
    v[1] = -10.0f;
    v[n - 1] = 10.0f;
  }
  return v;
}

std::vector<uint8_t> to_type(GgmlType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  quant_ref(t)->from_float(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

// Σ|w_i·x_i| from the dequantized rows, the scale of the allowed rounding difference.
double abs_dot(GgmlType wt, const std::vector<uint8_t>& w, GgmlType xt, const std::vector<uint8_t>& x,
               int64_t n) {
  std::vector<float> wf(static_cast<size_t>(n)), xf(static_cast<size_t>(n));
  quant_ref(wt)->to_float(w.data(), wf.data(), n);
  quant_ref(xt)->to_float(x.data(), xf.data(), n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(double(wf[i]) * xf[i]);
  return s;
}

// Random bytes make valid K-quant blocks that exercise every scale bit; keep d/dmin sane.
std::vector<uint8_t> random_k_blocks(GgmlType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> q(row_bytes(t, n));
  for (auto& c : q) c = static_cast<uint8_t>(rng());
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    if (t == GgmlType::q4_k) {
      BlockQ4_K* b = reinterpret_cast<BlockQ4_K*>(q.data()) + i;
      b->d = f32_to_fp16(0.01f + 0.001f * static_cast<float>(rng() % 100));
      b->dmin = f32_to_fp16(0.002f * static_cast<float>(rng() % 100));
    } else {
      BlockQ6_K* b = reinterpret_cast<BlockQ6_K*>(q.data()) + i;
      b->d = f32_to_fp16(0.001f + 0.0001f * static_cast<float>(rng() % 100));
    }
  }
  return q;
}

std::vector<int64_t> shapes(GgmlType t) {
  const int64_t bs = type_info(t).block_size;
  if (bs == 1) return {1, 7, 8, 31, 33, 100, 257, 1000, 2880};
  if (bs == 32) return {32, 64, 96, 224, 2880, 4096};
  if (bs == 64) return {64, 128, 192, 448, 2880, 4096};
  return {256, 512, 768, 2816};
}

std::string fmt_g(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2e", v);
  return b;
}

class Parity : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam()))
      GTEST_SKIP() << "CPU lacks " << isa_name(GetParam()) << ": parity not checked";
  }
};

TEST_P(Parity, ToFloatBitExact) {
  for (GgmlType t : kAllTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    for (int64_t n : shapes(t)) {
      const auto q = to_type(t, test_row(n, static_cast<uint32_t>(n)));
      std::vector<float> ref(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.0f);
      quant_ref(t)->to_float(q.data(), ref.data(), n);
      k.to_float(q.data(), got.data(), n);
      ASSERT_EQ(std::memcmp(ref.data(), got.data(), ref.size() * 4), 0) << type_name(t) << " n=" << n;
    }
  }
}

TEST_P(Parity, FromFloatBitExact) {
  for (GgmlType t : kAllTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    if (!k.from_float) continue;
    for (int64_t n : shapes(t)) {
      for (uint32_t seed = 0; seed < 10; ++seed) {
        const auto x = test_row(n, seed);
        std::vector<uint8_t> ref(row_bytes(t, n)), got(row_bytes(t, n), 0xcd);
        quant_ref(t)->from_float(x.data(), ref.data(), n);
        k.from_float(x.data(), got.data(), n);
        ASSERT_EQ(ref, got) << type_name(t) << " n=" << n << " seed=" << seed;
      }
    }
  }
}

TEST_P(Parity, VecDot) {
  for (GgmlType t : kWeightTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    const QuantRef& r = *quant_ref(t);
    const bool exact = t == GgmlType::q4_k || t == GgmlType::q6_k;
    double worst = 0;
    for (int64_t n : shapes(t)) {
      for (int row = 0; row < 7; ++row) {  // 7 weight rows per shape, one activation row
        const uint32_t seed = static_cast<uint32_t>(n * 16 + row);
        const auto w =
            (exact && row % 2 == 1) ? random_k_blocks(t, n, seed) : to_type(t, test_row(n, seed + 1000));
        const auto x = to_type(r.vec_dot_type, test_row(n, static_cast<uint32_t>(n)));
        const float ref = r.vec_dot(n, w.data(), x.data());
        const float got = k.vec_dot(n, w.data(), x.data());
        if (exact) {
          ASSERT_EQ(f32_bits(ref), f32_bits(got))
              << type_name(t) << " n=" << n << " row=" << row << " " << ref << " vs " << got;
        } else {
          const double mag = abs_dot(t, w, r.vec_dot_type, x, n);
          const double rel = std::fabs(double(got) - ref) / (mag + 1e-30);
          worst = std::max(worst, rel);
          ASSERT_LE(rel, 1e-5) << type_name(t) << " n=" << n << " row=" << row << " " << ref << " vs " << got;
        }
      }
    }
    std::printf("  [%s] %-6s vec_dot vs scalar: %s\n", isa_name(GetParam()), type_name(t),
                exact ? "bit-exact" : ("max |Δ|/Σ|w·x| = " + fmt_g(worst)).c_str());
  }
}

TEST(Traits, ActiveIsaAndUnsupportedTypes) {
  const KernelTraits& k = kernel_traits(GgmlType::q8_0);
  EXPECT_EQ(k.isa, active_isa());
  EXPECT_TRUE(k.can_matmul());
  EXPECT_FALSE(kernel_traits(GgmlType::q4_1).supported());
  EXPECT_FALSE(kernel_traits(GgmlType::q8_k).can_matmul());
  EXPECT_FALSE(kernel_traits(static_cast<GgmlType>(1000)).supported());
  // Every weight type has its own SIMD dot product at each level (not a fallback).
  for (GgmlType t : kWeightTypes) {
    EXPECT_NE(kernel_traits(t, Isa::avx2).vec_dot, kernel_traits(t, Isa::scalar).vec_dot) << type_name(t);
    EXPECT_NE(kernel_traits(t, Isa::avx512).vec_dot, kernel_traits(t, Isa::avx2).vec_dot) << type_name(t);
  }
  for (GgmlType t : kWeightTypes) {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      const KernelTraits& e = kernel_traits(t, isa);
      EXPECT_EQ(e.type, t);
      EXPECT_EQ(e.isa, isa);
      EXPECT_EQ(e.vec_dot_type, quant_ref(t)->vec_dot_type);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Parity, ::testing::Values(Isa::avx2, Isa::avx512),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(isa_name(i.param));
                         });

}  // namespace
}  // namespace strata
