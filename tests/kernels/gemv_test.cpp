// One-token kernels (KernelTraits::gemv) of every type on every SIMD ISA, against the scalar
// vec_dot: F16, BF16, Q8_0, Q4_0, MXFP4, NVFP4 within 1e-5·Σ|w_i·x_i| (f32 lanes vs the reference's
// order), Q4_K and Q6_K bit-identical to it and to the ISA's own register tile (the K kernels'
// f32 scaling is the vec_dot's, so decode equals prefill to the bit). Odd row counts, strided
// rows, lengths up to 4096 and past the kernels' segments (Q8_0 64 blocks, Q4_0 / MXFP4 128, F16
// 2048), weight bytes no quantizer writes, and rows that end at an unreadable page.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/kernel_test_data.h"
#include "kernels/traits.h"

namespace strata {
namespace {

using kernel_test::abs_dot;
using kernel_test::gaussian;

const GgmlType kAllTypes[] = {GgmlType::f16,   GgmlType::bf16,  GgmlType::q8_0, GgmlType::q4_0,
                              GgmlType::mxfp4, GgmlType::nvfp4, GgmlType::q4_k, GgmlType::q6_k};
const int64_t kRowCounts[] = {1, 2, 3, 4, 5, 7, 9, 13, 33};

bool k_quant(GgmlType t) {
  return t == GgmlType::q4_k || t == GgmlType::q6_k;
}

std::vector<int64_t> lengths(GgmlType t) {
  if (k_quant(t)) return {256, 512, 768, 1280, 4096};
  if (type_info(t).block_size == 32) return {32, 64, 96, 160, 224, 576, 1056, 2048 + 32, 4096, 4096 + 96};
  if (type_info(t).block_size == 64) return {64, 128, 192, 320, 576, 1088, 2048 + 64, 4096, 4096 + 192};
  return {1, 7, 8, 16, 40, 100, 1024, 1029, 2048 + 9, 4095, 4096};
}

using GemvIsa = kernel_test::IsaTest;

// nr rows (stride ws) at w against x: every y[r] equal (K-quants) or near the scalar vec_dot,
// y[nr] untouched; K-quants also equal the ISA's tile.
void check_rows(GgmlType t, const KernelTraits& k, int64_t n, const uint8_t* w, size_t ws, int64_t nr,
                const uint8_t* x, const char* what) {
  const QuantRef& ref = *quant_ref(t);
  std::vector<float> y(static_cast<size_t>(nr + 1), -7.0f);
  k.gemv(n, w, ws, nr, x, y.data());
  ASSERT_EQ(y[static_cast<size_t>(nr)], -7.0f) << type_name(t) << " wrote past nr=" << nr;
  for (int64_t r = 0; r < nr; ++r) {
    const uint8_t* wr = w + static_cast<size_t>(r) * ws;
    const float want = ref.vec_dot(n, wr, x);
    const float got = y[static_cast<size_t>(r)];
    if (k_quant(t)) {
      ASSERT_EQ(got, want) << type_name(t) << " " << what << " n=" << n << " nr=" << nr << " r=" << r;
      float tile = 0;
      const void* xs[1] = {x};
      float* ys[1] = {&tile};
      k.gemm(n, wr, ws, 1, xs, 1, ys);
      ASSERT_EQ(got, tile) << type_name(t) << " gemv != tile, " << what << " n=" << n << " r=" << r;
    } else {
      const double mag = abs_dot(t, wr, ref.vec_dot_type, x, n);
      ASSERT_LE(std::fabs(double(got) - want), 1e-5 * mag + 1e-30)
          << type_name(t) << " " << what << " n=" << n << " nr=" << nr << " r=" << r << " got " << got
          << " want " << want;
    }
  }
}

TEST_P(GemvIsa, EveryTypeHasAGemv) {
  for (GgmlType t : kAllTypes)
    EXPECT_NE(kernel_traits(t, GetParam()).gemv, nullptr) << type_name(t) << " on " << isa_name(GetParam());
}

TEST_P(GemvIsa, MatchesScalarVecDot) {
  for (GgmlType t : kAllTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    ASSERT_NE(k.gemv, nullptr) << type_name(t);
    const QuantRef& ref = *quant_ref(t);
    for (int64_t n : lengths(t)) {
      const size_t rb = row_bytes(t, n);
      const int64_t max_rows = 33;
      std::vector<uint8_t> x(row_bytes(ref.vec_dot_type, n));
      quant_ref(ref.vec_dot_type)
          ->from_float(gaussian(n, static_cast<uint32_t>(5 * n + 1)).data(), x.data(), n);
      for (size_t pad : {size_t{0}, size_t{10}}) {  // contiguous rows, and rows 10 bytes apart
        const size_t ws = rb + pad;
        std::vector<uint8_t> w(ws * max_rows);
        for (int64_t r = 0; r < max_rows; ++r)
          ref.from_float(gaussian(n, static_cast<uint32_t>(7 * n + r)).data(), w.data() + r * ws, n);
        for (int64_t nr : kRowCounts) {
          check_rows(t, k, n, w.data(), ws, nr, x.data(), pad ? "strided" : "contiguous");
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Weight bytes that no quantizer writes: random quant bytes under random (finite) scales, MXFP4
// exponents from the subnormal halves (0, 1) up to 2^12, NVFP4 scale bytes all random (every byte
// is a finite scale as ggml reads it, 0x7f and 0xff included).
TEST_P(GemvIsa, RawBlocksMatchScalarVecDot) {
  for (GgmlType t : {GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4, GgmlType::nvfp4}) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    const int64_t n = 1024 + 192, nr = 9;
    const size_t rb = row_bytes(t, n), bs = type_info(t).type_size;
    std::mt19937 rng(42);
    std::vector<uint8_t> w(rb * nr);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    for (size_t off = 0; off < w.size(); off += bs) {
      if (t == GgmlType::mxfp4) {
        const uint8_t es[] = {0, 1, 2, 64, 120, 127, 128, 140};
        w[off] = es[(off / bs) % 8];
      } else if (t == GgmlType::nvfp4) {
        if ((off / bs) % 5 == 0) w[off] = 0x7f, w[off + 3] = 0xff;
      } else {
        const uint16_t h =
            f32_to_fp16(std::ldexp(float(int(rng() % 2001) - 1000) / 1000.0f, int(rng() % 20) - 14));
        std::memcpy(&w[off], &h, 2);
      }
    }
    std::vector<uint8_t> x(row_bytes(GgmlType::q8_0, n));
    quant_ref(GgmlType::q8_0)->from_float(gaussian(n, 7).data(), x.data(), n);
    check_rows(t, k, n, w.data(), rb, nr, x.data(), "raw bytes");
    if (HasFatalFailure()) return;
  }
}

// Random bytes under random finite scales: every quant value, every 6-bit K scale and min, and
// activations at the extremes (±127, Q8_K's −128 excluded as its quantizer never writes it).
TEST_P(GemvIsa, KQuantRawBlocksMatchBitForBit) {
  for (GgmlType t : {GgmlType::q4_k, GgmlType::q6_k}) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    const int64_t n = 1024, nr = 11;
    const size_t rb = row_bytes(t, n), bs = type_info(t).type_size;
    std::mt19937 rng(7);
    std::vector<uint8_t> w(rb * nr);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    auto half = [&] {
      return f32_to_fp16(std::ldexp(float(int(rng() % 2001) - 1000) / 1000.0f, int(rng() % 16) - 8));
    };
    for (size_t off = 0; off < w.size(); off += bs) {
      const uint16_t d = half(), dmin = half();
      if (t == GgmlType::q4_k) {
        std::memcpy(&w[off], &d, 2);
        std::memcpy(&w[off + 2], &dmin, 2);
      } else {
        std::memcpy(&w[off + offsetof(BlockQ6_K, d)], &d, 2);
      }
    }
    std::vector<BlockQ8_K> x(static_cast<size_t>(n / QK_K));
    for (auto& b : x) {
      b.d = std::ldexp(float(rng() % 1000 + 1) / 1000.0f, -7);
      for (int l = 0; l < QK_K; ++l) b.qs[l] = static_cast<int8_t>(l % 5 == 0 ? 127 : int(rng() % 255) - 127);
      for (int j = 0; j < QK_K / 16; ++j) {
        int s = 0;
        for (int l = 0; l < 16; ++l) s += b.qs[16 * j + l];
        b.bsums[j] = static_cast<int16_t>(s);
      }
    }
    check_rows(t, k, n, w.data(), rb, nr, reinterpret_cast<const uint8_t*>(x.data()), "raw bytes");
    if (HasFatalFailure()) return;
  }
}

// The last row ends where an unreadable page starts: no kernel reads past a row's bytes.
TEST_P(GemvIsa, LastRowEndsAtUnreadablePage) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (GgmlType t : kAllTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    const QuantRef& ref = *quant_ref(t);
    const int64_t bs = type_info(t).block_size;
    const int64_t n0 = k_quant(t) ? 512 : (bs == 64 ? 192 : 96 + (bs == 1 ? 3 : 0));
    for (int64_t n : {n0, k_quant(t) ? int64_t{256} : std::max<int64_t>(bs, 32),
                      k_quant(t) ? int64_t{1024} : (bs == 64 ? int64_t{1088} : int64_t{1056})})
      for (int64_t nr : {int64_t{3}, int64_t{5}, int64_t{6}}) {
        const size_t rb = row_bytes(t, n), bytes = rb * static_cast<size_t>(nr);
        const size_t span = (bytes + page - 1) / page * page;
        void* m = mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(m, MAP_FAILED);
        ASSERT_EQ(mprotect(static_cast<uint8_t*>(m) + span, page, PROT_NONE), 0);
        uint8_t* w = static_cast<uint8_t*>(m) + span - bytes;
        for (int64_t r = 0; r < nr; ++r)
          ref.from_float(gaussian(n, static_cast<uint32_t>(r + 3)).data(), w + r * rb, n);
        std::vector<uint8_t> x(row_bytes(ref.vec_dot_type, n));
        quant_ref(ref.vec_dot_type)->from_float(gaussian(n, 9).data(), x.data(), n);
        check_rows(t, k, n, w, rb, nr, x.data(), "page end");
        munmap(m, span + page);
        if (HasFatalFailure()) return;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, GemvIsa, ::testing::Values(Isa::avx2, Isa::avx512),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(isa_name(i.param));
                         });

}  // namespace
}  // namespace strata
