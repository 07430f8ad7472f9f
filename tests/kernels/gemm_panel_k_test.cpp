// K-quant many-token panels (KernelTraits::gemm_panel for Q4_K / Q6_K against Q8_K) on AVX-512
// (16-row panels, 2-super-block K chunks, 8-token register tiles) and AVX2 (8-row panels,
// 4-super-block K chunks, 4-token register tiles) against the scalar vec_dot: row counts around
// both panel heights (odd ones included), every token count 1..64 (the tile path below the type's
// threshold, the register tiles and their remainders above it), lengths around both K chunks up to
// 4352, padded row strides.
// Error limit: none. The panels keep vec_dot's exact int32 super-block sums and its f32 operation
// order, so every output must be bit-identical to the scalar reference (as the K tiles and the SIMD
// vec_dots are, gemm_k_test / parity_test) whatever rows and tokens share the call; nothing outside
// [nr) × [nt) may be written.
// Data: quantized Gaussians, raw random blocks (every bit pattern of quants, 6-bit scales and mins,
// activations −128..127, which the quantizer never writes) and extreme blocks (all quant and scale
// bits set, Q6_K scales −128, activations all +127 or all −128): the latter drive AVX2's int16
// sums to their bounds (Q4_K: 8·2·15·128 = 30720, Q6_K: 2·2·63·128 = 32256) and the int32 sums to
// their largest magnitudes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/kernel_test_data.h"
#include "kernels/traits.h"

namespace strata {
namespace {

using kernel_test::gaussian;

enum class Data { gaussian, random, extreme };

// A weight row of raw bytes (random, or all 0xff) under finite fp16 super-block scales.
void weight_row(GgmlType t, uint8_t* dst, int64_t n, std::mt19937& rng, bool extreme) {
  const size_t bytes = row_bytes(t, n);
  for (size_t i = 0; i < bytes; ++i) dst[i] = extreme ? 0xff : static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> ud(-2.0f, 2.0f);
  for (int64_t b = 0; b < n / QK_K; ++b) {
    if (t == GgmlType::q4_k) {
      BlockQ4_K& blk = reinterpret_cast<BlockQ4_K*>(dst)[b];
      blk.d = f32_to_fp16(extreme ? 1.0f : ud(rng));
      blk.dmin = f32_to_fp16(extreme ? -1.0f : ud(rng));
    } else {
      BlockQ6_K& blk = reinterpret_cast<BlockQ6_K*>(dst)[b];
      blk.d = f32_to_fp16(extreme ? 1.0f : ud(rng));
      if (extreme)
        for (auto& s : blk.scales) s = -128;
    }
  }
}

// A Q8_K row of random quants (or all `extreme`) with consistent bsums.
void q8_k_row(uint8_t* dst, int64_t n, std::mt19937& rng, int extreme) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    BlockQ8_K& blk = reinterpret_cast<BlockQ8_K*>(dst)[b];
    blk.d = std::uniform_real_distribution<float>(1e-3f, 1.0f)(rng);
    for (int i = 0; i < QK_K; ++i)
      blk.qs[i] = extreme ? static_cast<int8_t>(extreme) : static_cast<int8_t>(rng());
    for (int j = 0; j < QK_K / 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += blk.qs[16 * j + i];
      blk.bsums[j] = static_cast<int16_t>(s);
    }
  }
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct Case {
  int64_t n, nr;
  int nt;
};

// Runs the panel on one case and checks every output's bits and the untouched borders.
void check_case(GgmlType t, const KernelTraits& k, const Case& c, Data data, int* checked) {
  const QuantRef& ref = *quant_ref(t);
  const uint32_t seed = static_cast<uint32_t>(c.n * 131 + c.nr * 7 + c.nt) + static_cast<uint32_t>(data);
  std::mt19937 rng(seed);
  const size_t ws = row_bytes(t, c.n) + 8;  // padded stride: rows are not contiguous
  std::vector<uint8_t> w(ws * static_cast<size_t>(c.nr));
  for (int64_t r = 0; r < c.nr; ++r) {
    uint8_t* row = w.data() + r * ws;
    if (data == Data::gaussian)
      ref.from_float(gaussian(c.n, seed + static_cast<uint32_t>(r)).data(), row, c.n);
    else
      weight_row(t, row, c.n, rng, data == Data::extreme);
  }
  const size_t xb = row_bytes(GgmlType::q8_k, c.n);
  std::vector<std::vector<uint8_t>> x(static_cast<size_t>(c.nt), std::vector<uint8_t>(xb));
  for (int i = 0; i < c.nt; ++i) {
    if (data == Data::gaussian)
      quant_ref(GgmlType::q8_k)
          ->from_float(gaussian(c.n, 7 * seed + static_cast<uint32_t>(i) + 100).data(), x[i].data(), c.n);
    else
      q8_k_row(x[i].data(), c.n, rng, data == Data::extreme ? (i % 2 ? 127 : -128) : 0);
  }
  // One output row more than nr and one token more than nt: both must stay untouched.
  std::vector<std::vector<float>> y(static_cast<size_t>(c.nt + 1), std::vector<float>(c.nr + 1, -7.0f));
  std::vector<const void*> xs(static_cast<size_t>(c.nt));
  std::vector<float*> ys(static_cast<size_t>(c.nt + 1));
  for (int i = 0; i < c.nt; ++i) xs[i] = x[i].data();
  for (int i = 0; i <= c.nt; ++i) ys[i] = y[i].data();
  k.gemm_panel(c.n, w.data(), ws, c.nr, xs.data(), c.nt, ys.data());
  for (int64_t r = 0; r <= c.nr; ++r) ASSERT_EQ(y[c.nt][r], -7.0f) << type_name(t) << " wrote past token nt";
  for (int i = 0; i < c.nt; ++i) {
    ASSERT_EQ(y[i][c.nr], -7.0f) << type_name(t) << " wrote past row " << c.nr;
    for (int64_t r = 0; r < c.nr; ++r) {
      const float want = ref.vec_dot(c.n, w.data() + r * ws, x[i].data());
      ASSERT_EQ(bits(y[i][r]), bits(want)) << type_name(t) << " n=" << c.n << " nr=" << c.nr << " nt=" << c.nt
                                           << " data=" << static_cast<int>(data) << " r=" << r << " t=" << i
                                           << ": " << y[i][r] << " vs " << want;
      ++*checked;
    }
  }
}

struct Param {
  GgmlType type;
  Isa isa;
};

class GemmPanelK : public ::testing::TestWithParam<Param> {
 protected:
  // The panel, or null (test skipped) when the CPU lacks the ISA.
  const KernelTraits* traits() {
    const Param p = GetParam();
    if (!isa_supported(p.isa)) return nullptr;
    const KernelTraits& k = kernel_traits(p.type, p.isa);
    EXPECT_NE(k.gemm_panel, nullptr) << type_name(p.type) << ": no " << isa_name(p.isa)
                                     << " panel registered";
    EXPECT_EQ(k.vec_dot_type, GgmlType::q8_k);
    return &k;
  }
};

TEST_P(GemmPanelK, BitIdenticalToScalarVecDot) {
  const KernelTraits* k = traits();
  if (!k) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam().isa);
  ASSERT_NE(k->gemm_panel, nullptr);
  // Rows 1..64 around the 8- and 16-row groups; one super-block to 17 (several K chunks of either
  // ISA, a last partial one).
  const Case cases[] = {{256, 1, 1},    {256, 9, 2},    {256, 17, 2},   {512, 8, 4},    {512, 16, 8},
                        {768, 5, 5},    {768, 5, 9},    {1024, 15, 16}, {1280, 33, 13}, {1024, 31, 64},
                        {2304, 17, 17}, {2304, 48, 17}, {4096, 37, 7},  {4096, 3, 64},  {4096, 8, 1},
                        {4352, 16, 1},  {1536, 1, 63},  {3072, 20, 25}, {512, 41, 33},  {512, 64, 33},
                        {768, 7, 40},   {512, 9, 10},   {1024, 18, 12}, {768, 21, 14},  {768, 23, 3},
                        {256, 16, 19},  {512, 5, 22},   {1280, 2, 27}};
  int checked = 0;
  for (const Case& c : cases)
    for (Data data : {Data::gaussian, Data::random, Data::extreme}) {
      check_case(GetParam().type, *k, c, data, &checked);
      if (HasFatalFailure()) return;
    }
  EXPECT_GT(checked, 0);
}

// Every token count 1..64 (every tile split and remainder, both sides of the tile threshold).
TEST_P(GemmPanelK, EveryTokenCount) {
  const KernelTraits* k = traits();
  if (!k) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam().isa);
  ASSERT_NE(k->gemm_panel, nullptr);
  int checked = 0;
  for (int nt = 1; nt <= kGemmPanelTokens; ++nt) {
    check_case(GetParam().type, *k, Case{1280, 11, nt}, nt % 2 ? Data::random : Data::extreme, &checked);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(checked, 0);
}

// The extreme operands really reach the limits the int16 bounds are stated for.
TEST(GemmPanelKData, ExtremeOperandsHitTheLimits) {
  std::mt19937 rng(1);
  std::vector<uint8_t> w4(row_bytes(GgmlType::q4_k, 256)), w6(row_bytes(GgmlType::q6_k, 256));
  weight_row(GgmlType::q4_k, w4.data(), 256, rng, true);
  weight_row(GgmlType::q6_k, w6.data(), 256, rng, true);
  const BlockQ4_K& b4 = *reinterpret_cast<const BlockQ4_K*>(w4.data());
  EXPECT_EQ(b4.qs[0], 0xff);      // nibbles 15
  EXPECT_EQ(b4.scales[0], 0xff);  // scale and min 63 for every sub-block
  const BlockQ6_K& b6 = *reinterpret_cast<const BlockQ6_K*>(w6.data());
  EXPECT_EQ((b6.ql[0] & 0x0f) | ((b6.qh[0] & 3) << 4), 63);
  EXPECT_EQ(b6.scales[3], -128);
  std::vector<uint8_t> x(row_bytes(GgmlType::q8_k, 256));
  q8_k_row(x.data(), 256, rng, -128);
  const BlockQ8_K& x0 = *reinterpret_cast<const BlockQ8_K*>(x.data());
  EXPECT_EQ(x0.qs[5], -128);
  EXPECT_EQ(x0.bsums[0], -128 * 16);
}

INSTANTIATE_TEST_SUITE_P(TypeIsa, GemmPanelK,
                         ::testing::Values(Param{GgmlType::q4_k, Isa::avx512},
                                           Param{GgmlType::q6_k, Isa::avx512},
                                           Param{GgmlType::q4_k, Isa::avx2},
                                           Param{GgmlType::q6_k, Isa::avx2}),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return std::string(type_name(i.param.type)) + "_" + isa_name(i.param.isa);
                         });

}  // namespace
}  // namespace strata
