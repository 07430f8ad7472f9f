// K-quant register tiles (KernelTraits::gemm for Q4_K / Q6_K against Q8_K) against the scalar
// vec_dot, every tile shape nr × nt in 1..4 × 1..4, n = 256..4096, strided weight rows.
// Error limit: none. The tiles keep vec_dot's exact int32 super-block sums and its f32 operation
// order (d·dx·sumi − dmin·dx·summ, summed over super-blocks in order), so every output must be
// bit-identical to the scalar reference, like the SIMD vec_dots (parity_test).
// Data: quantized Gaussians, and raw random blocks (every bit pattern of quants and scales,
// activations at ±127/−128) that drive the int16/int32 intermediate sums to their extremes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/matmul.h"
#include "kernels/traits.h"
#include "kernels/kernel_test_data.h"

namespace strata {
namespace {

using kernel_test::gaussian;

const GgmlType kKTypes[] = {GgmlType::q4_k, GgmlType::q6_k};

// A weight row of raw random bytes with finite fp16 scales (any quant / scale byte is valid).
void random_weight_row(GgmlType t, uint8_t* dst, int64_t n, std::mt19937& rng, bool extreme) {
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
        for (auto& s : blk.scales) s = -128;  // largest |scale|, with quants at 63 (31 after −32)
    }
  }
}

// A Q8_K row of random quants (−128..127, or all ±127) with consistent bsums.
void random_q8_k_row(uint8_t* dst, int64_t n, std::mt19937& rng, int extreme) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    BlockQ8_K& blk = reinterpret_cast<BlockQ8_K*>(dst)[b];
    blk.d = std::uniform_real_distribution<float>(1e-3f, 1.0f)(rng);
    for (int i = 0; i < QK_K; ++i)
      blk.qs[i] = extreme ? static_cast<int8_t>(extreme > 0 ? 127 : -128) : static_cast<int8_t>(rng());
    for (int j = 0; j < QK_K / 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += blk.qs[16 * j + i];
      blk.bsums[j] = static_cast<int16_t>(s);
    }
  }
}

enum class Data { gaussian, random, extreme };

struct Operands {
  std::vector<uint8_t> w;  // kGemmTileRows rows, ws bytes apart
  size_t ws = 0;
  std::vector<std::vector<uint8_t>> x;  // kGemmTileTokens Q8_K rows
};

Operands make_operands(GgmlType t, int64_t n, Data data, uint32_t seed) {
  Operands o;
  o.ws = row_bytes(t, n) + 8;  // padded stride: rows are not contiguous
  o.w.assign(o.ws * kGemmTileRows, 0);
  std::mt19937 rng(seed);
  for (int r = 0; r < kGemmTileRows; ++r) {
    uint8_t* row = o.w.data() + r * o.ws;
    if (data == Data::gaussian)
      quant_ref(t)->from_float(gaussian(n, seed + static_cast<uint32_t>(r)).data(), row, n);
    else
      random_weight_row(t, row, n, rng, data == Data::extreme);
  }
  o.x.assign(kGemmTileTokens, std::vector<uint8_t>(row_bytes(GgmlType::q8_k, n)));
  for (int i = 0; i < kGemmTileTokens; ++i) {
    if (data == Data::gaussian)
      quant_ref(GgmlType::q8_k)
          ->from_float(gaussian(n, 7 * seed + static_cast<uint32_t>(i) + 100).data(), o.x[i].data(), n);
    else
      random_q8_k_row(o.x[i].data(), n, rng, data == Data::extreme ? (i % 2 ? 1 : -1) : 0);
  }
  return o;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

using GemmK = kernel_test::IsaTest;

TEST_P(GemmK, TilesBitIdenticalToScalarVecDot) {
  int checked = 0;
  for (GgmlType t : kKTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    if (k.gemm == nullptr) continue;
    ASSERT_EQ(k.vec_dot_type, GgmlType::q8_k);
    const QuantRef& ref = *quant_ref(t);
    for (int64_t n : {256, 512, 768, 1280, 4096}) {
      for (Data data : {Data::gaussian, Data::random, Data::extreme}) {
        const Operands o = make_operands(t, n, data, static_cast<uint32_t>(n) + static_cast<uint32_t>(data));
        const void* xs[kGemmTileTokens];
        for (int i = 0; i < kGemmTileTokens; ++i) xs[i] = o.x[i].data();
        for (int nr = 1; nr <= kGemmTileRows; ++nr) {
          for (int nt = 1; nt <= kGemmTileTokens; ++nt) {
            std::vector<std::vector<float>> y(kGemmTileTokens, std::vector<float>(kGemmTileRows + 1, -7.0f));
            float* ys[kGemmTileTokens];
            for (int i = 0; i < kGemmTileTokens; ++i) ys[i] = y[i].data();
            k.gemm(n, o.w.data(), o.ws, nr, xs, nt, ys);
            for (int i = 0; i < kGemmTileTokens; ++i) {
              for (int r = 0; r <= kGemmTileRows; ++r) {
                if (i >= nt || r >= nr) {
                  ASSERT_EQ(y[i][r], -7.0f) << type_name(t) << " wrote outside the tile";
                  continue;
                }
                const float want = ref.vec_dot(n, o.w.data() + r * o.ws, o.x[i].data());
                const float simd = k.vec_dot(n, o.w.data() + r * o.ws, o.x[i].data());
                ASSERT_EQ(bits(y[i][r]), bits(want))
                    << type_name(t) << " n=" << n << " data=" << static_cast<int>(data) << " tile " << nr
                    << "x" << nt << " r=" << r << " t=" << i << ": " << y[i][r] << " vs " << want;
                ASSERT_EQ(bits(simd), bits(want)) << type_name(t) << " SIMD vec_dot";
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  if (GetParam() == Isa::avx512) {
    EXPECT_GT(checked, 0) << "no AVX-512 K-quant tile kernels registered";
  }
}

// The extreme operands must really reach the extremes the kernel's int16 pair sums are sized
// for, or the test above proves less than it claims: Q4_K 2·15·128 (nibbles 15, activations
// −128) and Q6_K 2·63·128.
TEST(GemmKData, ExtremeOperandsHitTheLimits) {
  const Operands q4 = make_operands(GgmlType::q4_k, 256, Data::extreme, 1);
  const BlockQ4_K& b4 = *reinterpret_cast<const BlockQ4_K*>(q4.w.data());
  EXPECT_EQ(b4.qs[0], 0xff);
  const Operands q6 = make_operands(GgmlType::q6_k, 256, Data::extreme, 1);
  const BlockQ6_K& b6 = *reinterpret_cast<const BlockQ6_K*>(q6.w.data());
  EXPECT_EQ((b6.ql[0] & 0x0f) | ((b6.qh[0] & 3) << 4), 63);
  EXPECT_EQ(b6.scales[3], -128);
  const BlockQ8_K& x0 = *reinterpret_cast<const BlockQ8_K*>(q6.x[0].data());
  EXPECT_EQ(x0.qs[5], -128);
  EXPECT_EQ(x0.bsums[0], -128 * 16);
}

// matmul_q and matmul_id through the tiles (row and token counts not multiples of the tile)
// equal the scalar vec_dot per element, bit for bit.
TEST_P(GemmK, MatmulAndMatmulIdBitIdentical) {
  ThreadPool pool(2);
  for (GgmlType t : kKTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    if (k.gemm == nullptr || kernel_traits(t).isa != GetParam()) continue;  // matmul uses the active ISA
    const int64_t in = 512, out = 37, n_expert = 3, nt = 11, n_used = 2;
    const size_t rb = row_bytes(t, in);
    std::vector<uint8_t> w(rb * out * n_expert);
    for (int64_t r = 0; r < out * n_expert; ++r)
      quant_ref(t)->from_float(gaussian(in, static_cast<uint32_t>(r)).data(), w.data() + r * rb, in);
    TensorView v;
    v.name = "w";
    v.type = t;
    v.n_dims = 3;
    v.ne[0] = in;
    v.ne[1] = out;
    v.ne[2] = n_expert;
    v.nb[0] = type_info(t).type_size;
    v.nb[1] = rb;
    v.nb[2] = rb * static_cast<size_t>(out);
    v.nb[3] = v.nb[2] * static_cast<size_t>(n_expert);
    v.data = w.data();
    v.nbytes = w.size();
    std::vector<float> x(static_cast<size_t>(in * nt));
    for (int64_t i = 0; i < nt; ++i) {
      auto g = gaussian(in, static_cast<uint32_t>(500 + i));
      std::copy(g.begin(), g.end(), x.begin() + i * in);
    }
    QuantizedActs qa;
    ASSERT_TRUE(quantize_activations(GgmlType::q8_k, x.data(), nt, in, qa, &pool).ok());
    // Expert 1 as a 2-D matmul.
    TensorView e1 = v;
    e1.n_dims = 2;
    e1.ne[2] = 1;
    e1.data = w.data() + v.nb[2];
    e1.nbytes = v.nb[2];
    std::vector<float> y(static_cast<size_t>(out * nt));
    ASSERT_TRUE(matmul_q(e1, qa, y.data(), pool).ok());
    for (int64_t i = 0; i < nt; ++i)
      for (int64_t r = 0; r < out; ++r)
        ASSERT_EQ(bits(y[i * out + r]), bits(quant_ref(t)->vec_dot(in, w.data() + (out + r) * rb, qa.row(i))))
            << type_name(t) << " matmul token " << i << " row " << r;
    // Routed: token i uses experts (i % 3, (i + 1) % 3).
    std::vector<int32_t> ids(static_cast<size_t>(nt * n_used));
    for (int64_t i = 0; i < nt; ++i) {
      ids[i * n_used] = static_cast<int32_t>(i % 3);
      ids[i * n_used + 1] = static_cast<int32_t>((i + 1) % 3);
    }
    std::vector<float> yid(static_cast<size_t>(out * nt * n_used));
    MatmulIdScratch scratch;
    ASSERT_TRUE(matmul_id(v, qa, ids.data(), nt, n_used, yid.data(), pool, scratch).ok());
    for (int64_t s = 0; s < nt * n_used; ++s)
      for (int64_t r = 0; r < out; ++r) {
        const uint8_t* wr = w.data() + (ids[s] * out + r) * rb;
        ASSERT_EQ(bits(yid[s * out + r]), bits(quant_ref(t)->vec_dot(in, wr, qa.row(s / n_used))))
            << type_name(t) << " matmul_id slot " << s << " row " << r;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, GemmK, ::testing::Values(Isa::avx2, Isa::avx512),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(isa_name(i.param));
                         });

}  // namespace
}  // namespace strata
