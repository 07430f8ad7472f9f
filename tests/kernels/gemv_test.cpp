// One-token kernels (KernelTraits::gemv) against the scalar vec_dot, per type × ISA: odd row
// counts, strided rows, lengths across the kernels' segment and chunk boundaries, outputs past nr
// untouched, and a matrix that ends at an unreadable page (the row tails must not over-read).
// Error limit: |Δ| ≤ 1e-5 · Σ|w_i·x_i| (f32 lanes vs the reference's order), as for the tiles.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/traits.h"
#include "kernels/kernel_test_data.h"

namespace strata {
namespace {

using kernel_test::abs_dot;
using kernel_test::gaussian;

const GgmlType kTypes[] = {GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4};
const int64_t kRowCounts[] = {1, 3, 7, 9, 33};

// Lengths up to 4096 and past the kernels' segments (Q8_0 64 blocks, Q4_0 128, MXFP4 128, F16 2048).
std::vector<int64_t> lengths(GgmlType t) {
  if (type_info(t).block_size == 32) return {32, 64, 96, 224, 576, 1056, 2048 + 32, 4096, 4096 + 96};
  return {1, 16, 40, 100, 1024, 2048 + 9, 4095};
}

using Gemv = kernel_test::IsaTest;

// nr rows (stride ws) at w against x: every y[r] near the scalar vec_dot, y[nr] untouched.
void check_rows(GgmlType t, const KernelTraits& k, int64_t n, const uint8_t* w, size_t ws, int64_t nr,
                const uint8_t* x, const char* what) {
  const QuantRef& ref = *quant_ref(t);
  std::vector<float> y(static_cast<size_t>(nr + 1), -7.0f);
  k.gemv(n, w, ws, nr, x, y.data());
  ASSERT_EQ(y[nr], -7.0f) << type_name(t) << " wrote past nr=" << nr;
  for (int64_t r = 0; r < nr; ++r) {
    const uint8_t* wr = w + static_cast<size_t>(r) * ws;
    const float want = ref.vec_dot(n, wr, x);
    const double mag = abs_dot(t, wr, ref.vec_dot_type, x, n);
    ASSERT_LE(std::fabs(double(y[r]) - want), 1e-5 * mag + 1e-30)
        << type_name(t) << " " << what << " n=" << n << " nr=" << nr << " r=" << r << " got " << y[r]
        << " want " << want;
  }
}

TEST_P(Gemv, MatchesScalarVecDot) {
  int checked = 0;
  for (GgmlType t : kTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    if (k.gemv == nullptr) continue;
    const QuantRef& ref = *quant_ref(t);
    for (int64_t n : lengths(t)) {
      const size_t rb = row_bytes(t, n);
      const int64_t max_rows = 33;
      const size_t xb = row_bytes(ref.vec_dot_type, n);
      std::vector<uint8_t> x(xb);
      quant_ref(ref.vec_dot_type)
          ->from_float(gaussian(n, static_cast<uint32_t>(3 * n + 100)).data(), x.data(), n);
      for (size_t pad : {size_t{0}, size_t{6}}) {  // contiguous rows, and rows 6 bytes apart
        const size_t ws = rb + pad;
        std::vector<uint8_t> w(ws * max_rows);
        for (int64_t r = 0; r < max_rows; ++r)
          ref.from_float(gaussian(n, static_cast<uint32_t>(n + r)).data(), w.data() + r * ws, n);
        for (int64_t nr : kRowCounts) {
          check_rows(t, k, n, w.data(), ws, nr, x.data(), pad ? "strided" : "contiguous");
          if (HasFatalFailure()) return;
          ++checked;
        }
      }
    }
  }
  if (GetParam() == Isa::avx512) {
    EXPECT_GE(checked, 5) << "AVX-512 gemv kernels missing";
  }
}

// Weight bytes that no quantizer writes: random quant bytes under random (finite) scales, MXFP4
// exponents from the subnormal halves (0, 1) up to 2^12.
TEST_P(Gemv, RawBlocksMatchScalarVecDot) {
  for (GgmlType t : {GgmlType::q8_0, GgmlType::q4_0, GgmlType::mxfp4}) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    if (k.gemv == nullptr) continue;
    const int64_t n = 1024 + 160, nr = 9;
    const size_t rb = row_bytes(t, n), bs = type_info(t).type_size;
    std::mt19937 rng(42);
    std::vector<uint8_t> w(rb * nr);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    for (size_t off = 0; off < w.size(); off += bs) {
      if (t == GgmlType::mxfp4) {
        const uint8_t es[] = {0, 1, 2, 64, 120, 127, 128, 140};
        w[off] = es[(off / bs) % 8];
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

// The last row ends where an unreadable page starts: tail chunks must load only their bytes.
TEST_P(Gemv, LastRowEndsAtUnreadablePage) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (GgmlType t : kTypes) {
    const KernelTraits& k = kernel_traits(t, GetParam());
    if (k.gemv == nullptr) continue;
    const QuantRef& ref = *quant_ref(t);
    for (int64_t n : {int64_t{32}, int64_t{96}, int64_t{1056}}) {
      const int64_t nr = 5;
      const size_t rb = row_bytes(t, n), bytes = rb * nr;
      const size_t span = (bytes + page - 1) / page * page;
      void* m = mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(m, MAP_FAILED);
      ASSERT_EQ(mprotect(static_cast<uint8_t*>(m) + span, page, PROT_NONE), 0);
      uint8_t* w = static_cast<uint8_t*>(m) + span - bytes;
      for (int64_t r = 0; r < nr; ++r)
        ref.from_float(gaussian(n, static_cast<uint32_t>(r + 11)).data(), w + r * rb, n);
      std::vector<uint8_t> x(row_bytes(ref.vec_dot_type, n));
      quant_ref(ref.vec_dot_type)->from_float(gaussian(n, 5).data(), x.data(), n);
      check_rows(t, k, n, w, rb, nr, x.data(), "page end");
      munmap(m, span + page);
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Gemv, ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(isa_name(i.param));
                         });

}  // namespace
}  // namespace strata
