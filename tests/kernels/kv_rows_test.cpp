// Typed KV rows (kernels/kv_rows.h) and the attention products that read them in place
// (kernels/ops.h KvRowOps), per type × ISA: every ISA bit-identical to the scalar reference; the
// reference for f16 / bf16 bit-identical to the f32 row products over the rows converted by
// quant/'s to_float, for the block types (q8_0, q4_0, iq4_nl) ggml's vec_dot against the Q8_0
// query and within rounding of the f32 products; kv_store equal to quant/'s from_float; the
// attention core over f16 / bf16 caches bit-identical to the same core over f32 caches holding
// the converted values (block types: close to it); the Hadamard rotation orthonormal and its own
// inverse; fp8_e4m3 / mxfp4 rows to f32 per ISA bit-identical to quant/'s to_float.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernels/attention_core.h"
#include "kernels/kernel_test_data.h"
#include "kernels/kv_rows.h"
#include "kernels/ops.h"
#include "kernels/traits.h"
#include "quant/fp8_fp4.h"
#include "quant/quant_ref.h"

namespace strata {
namespace {

using kernel_test::gaussian;

constexpr GgmlType kTypes[] = {GgmlType::f16,    GgmlType::bf16,     GgmlType::q8_0, GgmlType::q4_0,
                               GgmlType::iq4_nl, GgmlType::fp8_e4m3, GgmlType::mxfp4};

bool block_type(GgmlType t) {
  return t == GgmlType::q8_0 || t == GgmlType::q4_0 || t == GgmlType::iq4_nl;
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// nk rows of n values of type t (quantized from gaussians), and their f32 conversions.
struct Rows {
  std::vector<uint8_t> bytes;
  std::vector<float> f32;
  std::vector<const void*> p;
  std::vector<const float*> pf;
  Rows(GgmlType t, int64_t nk, int64_t n, uint32_t seed) {
    const size_t rb = row_bytes(t, n);
    bytes.resize(rb * static_cast<size_t>(nk));
    f32.resize(static_cast<size_t>(nk * n));
    const auto x = gaussian(nk * n, seed);
    for (int64_t j = 0; j < nk; ++j) {
      quant_ref(t)->from_float(x.data() + j * n, bytes.data() + j * rb, n);
      quant_ref(t)->to_float(bytes.data() + j * rb, f32.data() + j * n, n);
    }
    // Gathered in reverse order: the kernels take any addresses.
    for (int64_t j = nk - 1; j >= 0; --j) {
      p.push_back(bytes.data() + j * rb);
      pf.push_back(f32.data() + j * n);
    }
  }
};

using KvRowsIsa = kernel_test::IsaTest;

// Both products of ISA `isa` over rows r against the scalar reference, bit for bit.
void expect_same_as_reference(Isa isa, GgmlType t, const Rows& r, const std::vector<float>& q, int64_t nk,
                              int64_t n) {
  const KvRowOps& ops = ops_table(isa).kv_rows(t);
  const KvRowOps& ref = ops_table(Isa::scalar).kv_rows(t);
  std::vector<float> got(static_cast<size_t>(nk)), want(static_cast<size_t>(nk));
  ops.dot_rows(q.data(), r.p.data(), nk, n, got.data());
  ref.dot_rows(q.data(), r.p.data(), nk, n, want.data());
  for (int64_t j = 0; j < nk; ++j)
    ASSERT_TRUE(same_bits(got[j], want[j])) << j << ": " << got[j] << " vs " << want[j];
  const auto s = gaussian(nk, 9);
  std::vector<float> y = gaussian(n, 11), y_ref = y;
  ops.add_scaled_rows(y.data(), r.p.data(), s.data(), nk, n);
  ref.add_scaled_rows(y_ref.data(), r.p.data(), s.data(), nk, n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_TRUE(same_bits(y[i], y_ref[i])) << i << ": " << y[i] << " vs " << y_ref[i];
}

TEST_P(KvRowsIsa, ProductsMatchTheScalarReference) {
  for (GgmlType t : kTypes)
    for (int64_t n : {32, 64, 128, 256, 40, 72, 1024}) {
      if (n % type_info(t).block_size != 0) continue;
      for (int64_t nk : {1, 3, 4, 5, 8, 9, 16, 64}) {
        SCOPED_TRACE(std::string(type_name(t)) + " n " + std::to_string(n) + " keys " + std::to_string(nk));
        const Rows r(t, nk, n, static_cast<uint32_t>(n * 100 + nk));
        expect_same_as_reference(GetParam(), t, r, gaussian(n, 7), nk, n);
      }
    }
}

// Block rows of arbitrary bytes (every integer value, Q8_0's −128 included; finite scales) and
// queries with outliers: the integer paths stay exact.
TEST_P(KvRowsIsa, BlockProductsExactOnArbitraryBytes) {
  for (GgmlType t : {GgmlType::q8_0, GgmlType::q4_0, GgmlType::iq4_nl}) {
    const int64_t n = 128, nk = 21;
    Rows r(t, nk, n, 5);
    uint32_t h = 12345;
    for (uint8_t& b : r.bytes) b = static_cast<uint8_t>((h = h * 1664525u + 1013904223u) >> 24);
    const size_t bb = row_bytes(t, 32);
    for (size_t o = 0; o < r.bytes.size(); o += bb) {
      const uint16_t d = f32_to_fp16(0.01f * static_cast<float>(o % 7) - 0.02f);
      std::memcpy(r.bytes.data() + o, &d, 2);
    }
    auto q = gaussian(n, 8);
    q[3] = 300.0f;
    q[77] = -1e-3f;
    SCOPED_TRACE(type_name(t));
    expect_same_as_reference(GetParam(), t, r, q, nk, n);
  }
}

// The reference itself: f16 / bf16 exactly the f32 products of the converted rows; block types
// ggml's vec_dot against the query as Q8_0, within the query's quantization of the f32 products.
TEST(KvRows, ReferenceProductsAgainstTheF32RowsOfTheConvertedValues) {
  const OpsTable& ref = ops_table(Isa::scalar);
  const int64_t n = 128, nk = 13;
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(type_name(t));
    const Rows r(t, nk, n, 3);
    const auto q = gaussian(n, 4);
    std::vector<float> got(nk), want(nk);
    ref.kv_rows(t).dot_rows(q.data(), r.p.data(), nk, n, got.data());
    ref.dot_f32_rows(q.data(), r.pf.data(), nk, n, want.data());
    std::vector<BlockQ8_0> qq(n / 32);
    from_float_q8_0(q.data(), qq.data(), n);
    for (int64_t j = 0; j < nk; ++j) {
      if (!block_type(t)) {
        EXPECT_TRUE(same_bits(got[j], want[j])) << j;
        continue;
      }
      EXPECT_TRUE(same_bits(got[j], quant_ref(t)->vec_dot(n, r.p[j], qq.data()))) << j;
      // The query's rounding: at most half a step (amax/127) of its block per value, plus f32 slack.
      double bound = 0, mag = 0;
      for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(q[b * 32 + i]));
        for (int i = 0; i < 32; ++i) {
          const double kv = std::fabs(r.pf[j][b * 32 + i]);
          bound += 0.5 * amax / 127.0 * 1.01 * kv;
          mag += kv * std::fabs(q[b * 32 + i]);
        }
      }
      EXPECT_NEAR(got[j], want[j], bound + 1e-5 * mag) << j;
    }
    const auto s = gaussian(nk, 9);
    std::vector<float> y(n, 0.0f), y_ref(n, 0.0f);
    ref.kv_rows(t).add_scaled_rows(y.data(), r.p.data(), s.data(), nk, n);
    ref.vec_add_scaled_rows(y_ref.data(), r.pf.data(), s.data(), nk, n);
    for (int64_t i = 0; i < n; ++i) {
      if (block_type(t))
        EXPECT_NEAR(y[i], y_ref[i], 1e-5f * (1.0f + std::fabs(y_ref[i]))) << i;
      else
        EXPECT_TRUE(same_bits(y[i], y_ref[i])) << i;
    }
  }
}

// DeepSeek's KV rows to f32 (KernelTraits::to_float of fp8_e4m3 / mxfp4, what attention and the
// indexer convert typed rows with) per ISA: the scalar reference's bits on every E4M3 byte / E2M1
// nibble under every UE8M0 / E8M0 scale byte (NaN where it gives NaN), into unaligned rows.
TEST_P(KvRowsIsa, Fp8AndMxfp4RowsToF32MatchTheScalarReference) {
  for (GgmlType t : {GgmlType::fp8_e4m3, GgmlType::mxfp4}) {
    SCOPED_TRACE(type_name(t));
    const size_t bb = row_bytes(t, 32);
    const int64_t n = 256 * 32;  // block b: scale byte b
    std::vector<uint8_t> bytes(bb * 256);
    uint32_t h = 99;
    for (size_t b = 0; b < 256; ++b) {
      bytes[b * bb] = static_cast<uint8_t>(b);
      for (size_t j = 1; j < bb; ++j)  // fp8: every byte under each scale over 8 blocks; mxfp4: random
        bytes[b * bb + j] = static_cast<uint8_t>(
            t == GgmlType::fp8_e4m3 ? (b * 32 + j - 1) % 256 : (h = h * 1664525u + 1013904223u) >> 24);
    }
    const auto to_f32 = kernel_traits(t, GetParam()).to_float;
    ASSERT_NE(to_f32, nullptr);
    for (int64_t len : {int64_t{32}, int64_t{64}, n}) {
      std::vector<float> got(static_cast<size_t>(len) + 1), want(static_cast<size_t>(len));
      const uint8_t* src = bytes.data() + (len == n ? 0 : 3 * bb);
      to_f32(src, got.data() + 1, len);
      quant_ref(t)->to_float(src, want.data(), len);
      for (int64_t i = 0; i < len; ++i) {
        const float g = got[static_cast<size_t>(i) + 1], w = want[static_cast<size_t>(i)];
        ASSERT_TRUE(same_bits(g, w) || (std::isnan(g) && std::isnan(w)))
            << len << " " << i << ": " << g << " vs " << w;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, KvRowsIsa, ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

TEST(KvRows, StoreConvertsAHeadInPlace) {
  for (GgmlType t : {GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0,
                     GgmlType::iq4_nl, GgmlType::fp8_e4m3, GgmlType::mxfp4}) {
    const int64_t w = 128, cap = 4;
    std::vector<uint8_t> buf(row_bytes(t, w) * cap, 0);
    const KvRows r = KvRows::typed(buf.data(), w, cap, true, t);
    const auto x = gaussian(64, 3);
    kv_store(r, 6, 64, x.data(), 64);  // ring: slot 2, the second head
    std::vector<uint8_t> want(row_bytes(t, 64));
    if (t == GgmlType::f32)
      std::memcpy(want.data(), x.data(), want.size());
    else
      quant_ref(t)->from_float(x.data(), want.data(), 64);
    EXPECT_EQ(r.row_ptr(6), buf.data() + 2 * r.row_bytes);
    EXPECT_EQ(std::memcmp(r.row_ptr(6) + r.col_bytes(64), want.data(), want.size()), 0) << type_name(t);
    for (size_t i = 0; i < r.col_bytes(64); ++i) EXPECT_EQ(r.row_ptr(6)[i], 0);  // first head untouched
  }
}

// FP8 KV rows (DeepSeek's layout): 33 B per 32 values; the UE8M0 scale is the power of two >=
// amax / 448, every value within half an E4M3 step (3 mantissa bits; subnormal steps 2^-9 · s).
TEST(KvRows, Fp8RowsRoundToE4m3WithAUe8m0Scale) {
  EXPECT_EQ(row_bytes(GgmlType::fp8_e4m3, 512), 528u);
  auto x = gaussian(256, 17);
  x[5] = 1000.0f;  // an outlier sets its block's scale
  x[40] = 0.0f;
  std::vector<uint8_t> b(row_bytes(GgmlType::fp8_e4m3, 256));
  std::vector<float> y(256);
  quant_ref(GgmlType::fp8_e4m3)->from_float(x.data(), b.data(), 256);
  quant_ref(GgmlType::fp8_e4m3)->to_float(b.data(), y.data(), 256);
  for (int blk = 0; blk < 8; ++blk) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[blk * 32 + i]));
    const float s = ue8m0_to_f32(b[static_cast<size_t>(blk) * 33]);
    EXPECT_GE(s * 448.0f, amax);
    EXPECT_LT(s * 224.0f, amax);
    for (int i = 0; i < 32; ++i) {
      const float v = x[blk * 32 + i];
      EXPECT_LE(std::fabs(y[blk * 32 + i] - v), std::max(std::fabs(v) / 16.0f, s / 1024.0f))
          << blk << " " << i;
    }
  }
  EXPECT_EQ(y[5], 1024.0f);  // scale 4; 1000 / 4 = 250 rounds to 256 (E4M3 steps of 16 in [128, 256))
  EXPECT_EQ(y[40], 0.0f);
}

TEST(KvRows, HadamardIsOrthonormalAndItsOwnInverse) {
  EXPECT_EQ(hadamard_block(128), 128);
  EXPECT_EQ(hadamard_block(96), 32);
  EXPECT_EQ(hadamard_block(512), 256);
  EXPECT_EQ(hadamard_block(7), 1);
  for (int64_t n : {64, 96, 128, 512}) {
    const auto a = gaussian(n, 1), b = gaussian(n, 2);
    auto ra = a, rb = b;
    hadamard_rotate(ra.data(), n);
    hadamard_rotate(rb.data(), n);
    double d0 = 0, d1 = 0, sc = 0;
    for (int64_t i = 0; i < n; ++i) {
      d0 += double(a[i]) * b[i];
      d1 += double(ra[i]) * rb[i];
      sc += std::fabs(double(a[i]) * b[i]);
    }
    EXPECT_NEAR(d0, d1, 1e-5 * sc) << n;
    hadamard_rotate(ra.data(), n);
    float amax = 0;
    for (float x : a) amax = std::max(amax, std::fabs(x));
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(ra[i], a[i], 1e-6f * amax) << n << " " << i;
  }
}

// The attention core over f16 / bf16 K / V caches gives the bits of the same core over f32 caches
// holding the converted values (each key block's products are the f32 ones); over block-type
// caches it stays close (the query is quantized for q·k).
TEST(KvRows, AttentionOverTypedCachesAgainstF32OfTheConvertedRows) {
  const int n_head = 4, n_kv = 2, hd = 64, n_tok = 3;
  const int64_t w = int64_t{n_kv} * hd, cap = 150;
  ThreadPool pool(2);
  for (GgmlType kt : kTypes)
    for (GgmlType vt : {GgmlType::f16, GgmlType::bf16, GgmlType::q4_0, GgmlType::q8_0, GgmlType::iq4_nl}) {
      const Rows k(kt, cap, w, 21), v(vt, cap, w, 22);
      std::vector<uint8_t> kb = k.bytes, vb = v.bytes;
      std::vector<float> kf = k.f32, vf = v.f32;
      const KvRows kr = KvRows::typed(kb.data(), w, cap, false, kt),
                   vr = KvRows::typed(vb.data(), w, cap, false, vt);
      const KvRows kfr = KvRows::f32(kf.data(), w, cap, false), vfr = KvRows::f32(vf.data(), w, cap, false);
      const AttnShape s{n_head, n_kv, hd, hd, 0.125f, nullptr};
      const auto q = gaussian(int64_t{n_tok} * n_head * hd, 5);
      std::vector<AttnKeys> keys, keys_f;
      const int32_t idx[] = {3, 140, 77};
      for (int t = 0; t < n_tok; ++t) {
        keys.push_back(causal_keys(kr, vr, 130 + t, 0));
        keys_f.push_back(causal_keys(kfr, vfr, 130 + t, 0));
        keys.back().list = {&kr, &vr, idx, 3};
        keys_f.back().list = {&kfr, &vfr, idx, 3};
      }
      std::vector<float> o(static_cast<size_t>(n_tok * n_head * hd)), of(o.size());
      attend(s, q.data(), n_tok, keys, o.data(), pool);
      attend(s, q.data(), n_tok, keys_f, of.data(), pool);
      float vmax = 0;
      for (float x : vf) vmax = std::max(vmax, std::fabs(x));
      for (size_t i = 0; i < o.size(); ++i) {
        if (block_type(kt) || block_type(vt))
          ASSERT_NEAR(o[i], of[i], 0.02f * vmax) << type_name(kt) << "/" << type_name(vt) << " " << i;
        else
          ASSERT_TRUE(same_bits(o[i], of[i])) << type_name(kt) << "/" << type_name(vt) << " " << i;
      }
    }
}

}  // namespace
}  // namespace strata
