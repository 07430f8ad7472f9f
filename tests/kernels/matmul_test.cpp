// matmul / matmul_id / dequantize_row vs a naive double-precision reference on dequantized
// operands, for every weight type, on the active ISA (run with STRATA_ISA=scalar|avx2 to check
// the others end to end).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace strata {
namespace {

const GgmlType kWeightTypes[] = {GgmlType::f32,   GgmlType::f16,  GgmlType::bf16,
                                 GgmlType::q8_0,  GgmlType::q4_0, GgmlType::mxfp4,
                                 GgmlType::nvfp4, GgmlType::q4_k, GgmlType::q6_k};

std::vector<float> randn(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

// A contiguous weight {in, out, n_expert} quantized from random data, with its dequantized copy.
struct Weight {
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // [n_expert][out][in]
  TensorView view;
};

Weight make_weight(GgmlType t, int64_t in, int64_t out, int64_t n_expert, uint32_t seed) {
  Weight w;
  const auto f = randn(in * out * n_expert, seed);
  const size_t rb = row_bytes(t, in);
  w.bytes.resize(rb * static_cast<size_t>(out * n_expert));
  w.deq.resize(f.size());
  for (int64_t r = 0; r < out * n_expert; ++r) {
    quant_ref(t)->from_float(f.data() + r * in, w.bytes.data() + r * rb, in);
    quant_ref(t)->to_float(w.bytes.data() + r * rb, w.deq.data() + r * in, in);
  }
  TensorView& v = w.view;
  v.name = std::string("w.") + type_name(t);
  v.type = t;
  v.n_dims = n_expert > 1 ? 3 : 2;
  v.ne[0] = in;
  v.ne[1] = out;
  v.ne[2] = n_expert;
  v.nb[0] = type_info(t).type_size;
  v.nb[1] = rb;
  v.nb[2] = rb * static_cast<size_t>(out);
  v.nb[3] = v.nb[2] * static_cast<size_t>(n_expert);
  v.data = w.bytes.data();
  v.nbytes = w.bytes.size();
  return w;
}

// x as the kernels see it (converted to vec_dot_type and back to f32).
std::vector<float> as_seen(GgmlType vdt, const std::vector<float>& x, int64_t n_tokens, int64_t in) {
  std::vector<float> out(x.size());
  std::vector<uint8_t> tmp(row_bytes(vdt, in));
  for (int64_t t = 0; t < n_tokens; ++t) {
    quant_ref(vdt)->from_float(x.data() + t * in, tmp.data(), in);
    quant_ref(vdt)->to_float(tmp.data(), out.data() + t * in, in);
  }
  return out;
}

TEST(Matmul, MatchesDoubleReferencePerType) {
  ThreadPool pool(2);
  QuantizedActs qa;
  for (GgmlType t : kWeightTypes) {
    for (auto [in, out, n_tokens] :
         {std::tuple<int64_t, int64_t, int64_t>{256, 7, 1}, {512, 33, 3}, {768, 2, 5}}) {
      Weight w = make_weight(t, in, out, 1, static_cast<uint32_t>(in + out));
      const auto x = randn(n_tokens * in, 99);
      std::vector<float> y(static_cast<size_t>(n_tokens * out), NAN);
      ASSERT_TRUE(matmul(w.view, x.data(), n_tokens, y.data(), pool, qa).ok());
      const auto xs = as_seen(kernel_traits(t).vec_dot_type, x, n_tokens, in);
      double worst = 0, noise2 = 0, ref2 = 0;
      for (int64_t tk = 0; tk < n_tokens; ++tk) {
        for (int64_t r = 0; r < out; ++r) {
          double ref = 0, mag = 0, exact_x = 0;
          for (int64_t i = 0; i < in; ++i) {
            ref += double(w.deq[r * in + i]) * xs[tk * in + i];
            mag += std::fabs(double(w.deq[r * in + i]) * xs[tk * in + i]);
            exact_x += double(w.deq[r * in + i]) * x[tk * in + i];
          }
          const double got = y[tk * out + r];
          worst = std::max(worst, std::fabs(got - ref) / mag);
          noise2 += (got - exact_x) * (got - exact_x);
          ref2 += exact_x * exact_x;
        }
      }
      EXPECT_LE(worst, 1e-5) << type_name(t) << " in=" << in << " out=" << out;
      // Against unconverted f32 x: only the activation rounding (≤ ~1 % for 8-bit types).
      EXPECT_LT(std::sqrt(noise2 / ref2), 0.02) << type_name(t);
    }
  }
}

TEST(Matmul, SharedActivationsAndOutputStride) {
  ThreadPool pool(2);
  Weight a = make_weight(GgmlType::q8_0, 64, 5, 1, 1), b = make_weight(GgmlType::mxfp4, 64, 3, 1, 2);
  const auto x = randn(2 * 64, 5);
  QuantizedActs qa;
  ASSERT_TRUE(quantize_activations(GgmlType::q8_0, x.data(), 2, 64, qa).ok());
  // Both weights write into one [2][8] buffer: a's outputs at columns 0..4, b's at 5..7.
  std::vector<float> y(16, NAN);
  ASSERT_TRUE(matmul_q(a.view, qa, y.data(), pool, 8).ok());
  ASSERT_TRUE(matmul_q(b.view, qa, y.data() + 5, pool, 8).ok());
  std::vector<float> ya(10), yb(6);
  ASSERT_TRUE(matmul_q(a.view, qa, ya.data(), pool).ok());
  ASSERT_TRUE(matmul_q(b.view, qa, yb.data(), pool).ok());
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < 5; ++r) EXPECT_EQ(y[t * 8 + r], ya[t * 5 + r]);
    for (int r = 0; r < 3; ++r) EXPECT_EQ(y[t * 8 + 5 + r], yb[t * 3 + r]);
  }
}

TEST(Matmul, RoutedMatchesPerExpertSlices) {
  ThreadPool pool(2);
  for (GgmlType t : {GgmlType::mxfp4, GgmlType::q8_0, GgmlType::q4_k, GgmlType::f32}) {
    const int64_t in = 256, out = 17, n_expert = 8, n_used = 3, n_tokens = 5;
    Weight w = make_weight(t, in, out, n_expert, 3);
    std::vector<int32_t> ids(n_tokens * n_used);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 5 + i / 3) % n_expert);
    const GgmlType vdt = kernel_traits(t).vec_dot_type;
    // Shared input (gate/up) and per-slot input (down).
    for (const int64_t rows : {n_tokens, n_tokens * n_used}) {
      const auto x = randn(rows * in, 7);
      QuantizedActs qa;
      ASSERT_TRUE(quantize_activations(vdt, x.data(), rows, in, qa).ok());
      std::vector<float> y(static_cast<size_t>(n_tokens * n_used * out), NAN);
      MatmulIdScratch scratch;
      ASSERT_TRUE(matmul_id(w.view, qa, ids.data(), n_tokens, n_used, y.data(), pool, scratch).ok());
      for (int64_t s = 0; s < n_tokens * n_used; ++s) {
        TensorView e = w.view;  // slice by hand: kernels tests do not link format/
        e.data = w.bytes.data() + ids[s] * w.view.nb[2];
        e.ne[2] = 1;
        e.n_dims = 2;
        QuantizedActs one;
        const int64_t xr = rows == n_tokens ? s / n_used : s;
        ASSERT_TRUE(quantize_activations(vdt, x.data() + xr * in, 1, in, one).ok());
        std::vector<float> ye(out);
        ASSERT_TRUE(matmul_q(e, one, ye.data(), pool).ok());
        // A slice of one token runs the gemv kernel, an expert's routed group the tiles: equal up
        // to f32 summation order.
        for (int64_t r = 0; r < out; ++r)
          ASSERT_NEAR(y[s * out + r], ye[r], 1e-4 * (1.0 + std::fabs(ye[r])))
              << type_name(t) << " slot " << s;
      }
    }
  }
}

TEST(Matmul, ErrorsNameTheProblem) {
  ThreadPool pool(1);
  Weight w = make_weight(GgmlType::q4_0, 64, 4, 1, 1);
  std::vector<float> x(64, 1.0f), y(4);
  QuantizedActs qa;
  ASSERT_TRUE(quantize_activations(GgmlType::f32, x.data(), 1, 64, qa).ok());
  Status s = matmul_q(w.view, qa, y.data(), pool);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("q8_0"), std::string::npos) << s.message();
  ASSERT_TRUE(quantize_activations(GgmlType::q8_0, x.data(), 1, 32, qa).ok());
  s = matmul_q(w.view, qa, y.data(), pool);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("64 inputs"), std::string::npos) << s.message();
  s = quantize_activations(GgmlType::q8_0, x.data(), 1, 40, qa);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("block size"), std::string::npos) << s.message();
  TensorView bad = w.view;
  bad.type = GgmlType::q4_1;
  s = matmul(bad, x.data(), 1, y.data(), pool, qa);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("q4_1"), std::string::npos) << s.message();
  // A view smaller than its shape says is refused before any read.
  TensorView short_view = w.view;
  short_view.nbytes -= 1;
  ASSERT_TRUE(quantize_activations(GgmlType::q8_0, x.data(), 1, 64, qa).ok());
  s = matmul_q(short_view, qa, y.data(), pool);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bytes"), std::string::npos) << s.message();
  EXPECT_FALSE(dequantize_row(GgmlType::q4_0, w.bytes.data(), y.data(), 33).ok());
  EXPECT_FALSE(dequantize_row(GgmlType::iq2_xs, w.bytes.data(), y.data(), 256).ok());
  // Routed: an out-of-range expert id is reported, not read.
  Weight we = make_weight(GgmlType::q8_0, 64, 4, 2, 1);
  ASSERT_TRUE(quantize_activations(GgmlType::q8_0, x.data(), 1, 64, qa).ok());
  const int32_t ids[2] = {1, 2};
  MatmulIdScratch scratch;
  std::vector<float> y2(8);
  s = matmul_id(we.view, qa, ids, 1, 2, y2.data(), pool, scratch);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("expert 2"), std::string::npos) << s.message();
}

TEST(Matmul, DequantizeRowIsExact) {
  for (GgmlType t : kWeightTypes) {
    Weight w = make_weight(t, 512, 1, 1, 4);
    std::vector<float> y(512);
    ASSERT_TRUE(dequantize_row(t, w.bytes.data(), y.data(), 512).ok());
    for (int i = 0; i < 512; ++i) ASSERT_EQ(y[i], w.deq[i]) << type_name(t);
  }
}

}  // namespace
}  // namespace strata
