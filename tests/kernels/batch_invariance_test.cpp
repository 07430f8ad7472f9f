// Batch invariance of the matrix products (design.md principle 3): the bits of y[t][r] = W_r · x[t]
// do not depend on how many tokens share the call (1 in decode, any count in a mixed batch or a
// prompt chunk), on which of them they are, nor on the row range a thread was handed. For every
// weight type × ISA the CPU has, through matmul_rows (what model/linear and the MoE run) and
// matmul_rows_gather (the tokens routed to one expert).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/kernel_test_data.h"

namespace strata {
namespace {

using kernel_test::gaussian;

const GgmlType kTypes[] = {GgmlType::f32,   GgmlType::f16,   GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0,
                           GgmlType::mxfp4, GgmlType::nvfp4, GgmlType::q4_k, GgmlType::q6_k};

struct Case {
  GgmlType type;
  Isa isa;
};

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return std::string(type_name(i.param.type)) + "_" + isa_name(i.param.isa);
}

class MatmulInvariance : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam().isa)) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam().isa);
  }
};

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

TEST_P(MatmulInvariance, RowBitsIndependentOfTokensAndRows) {
  const GgmlType t = GetParam().type;
  const KernelTraits& kt = kernel_traits(t, GetParam().isa);
  ASSERT_TRUE(kt.can_matmul());
  const GgmlType vt = kt.vec_dot_type;
  // n past one F16 segment (1024) and not a multiple of 512; 53 rows: odd tails in every blocking.
  const int64_t bs = type_info(t).block_size;
  const int64_t n = bs == 256 ? 1280 : (bs == 64 ? 1152 : 1120), rows = 53, nt_all = 70;
  const size_t wrb = row_bytes(t, n), xrb = row_bytes(vt, n);
  std::vector<uint8_t> w(wrb * rows), x(xrb * nt_all);
  const auto wf = gaussian(n * rows, 11), xf = gaussian(n * nt_all, 13);
  for (int64_t r = 0; r < rows; ++r) quant_ref(t)->from_float(wf.data() + r * n, w.data() + r * wrb, n);
  for (int64_t i = 0; i < nt_all; ++i) quant_ref(vt)->from_float(xf.data() + i * n, x.data() + i * xrb, n);

  // The reference: every token alone (decode), all rows in one call.
  std::vector<float> ref(static_cast<size_t>(nt_all * rows));
  for (int64_t i = 0; i < nt_all; ++i)
    matmul_rows(kt, n, w.data(), wrb, 0, rows, x.data() + i * xrb, xrb, 1, ref.data() + i * rows, rows);

  std::vector<float> y(static_cast<size_t>(nt_all * rows));
  auto check = [&](const char* what, int64_t t0, int64_t nt, int64_t r0, int64_t r1) {
    for (int64_t i = t0; i < t0 + nt; ++i)
      for (int64_t r = r0; r < r1; ++r) {
        const float a = y[i * rows + r], b = ref[i * rows + r];
        ASSERT_TRUE(same_bits(a, b)) << what << ": token " << i << " of " << t0 << ".." << t0 + nt << ", row "
                                     << r << " of " << r0 << ".." << r1 << ": " << a << " vs alone " << b;
      }
  };
  for (int64_t nt : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 64, 65, 70}) {
    for (int64_t t0 : {int64_t{0}, nt_all - nt}) {
      // All rows, then a thread's share: rows handed out in blocks (64 in matmul_rows_parallel,
      // any range in the attention / MoE items).
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, rows}, {0, 16}, {16, 53}, {5, 29}, {52, 53}}) {
        std::fill(y.begin(), y.end(), -1.0f);
        matmul_rows(kt, n, w.data(), wrb, r0, r1, x.data() + t0 * xrb, xrb, nt, y.data() + t0 * rows, rows);
        check("matmul_rows", t0, nt, r0, r1);
        std::vector<const void*> xs(static_cast<size_t>(nt));
        for (int64_t i = 0; i < nt; ++i) xs[i] = x.data() + (t0 + nt - 1 - i) * xrb;  // reversed order
        std::vector<float> yr(static_cast<size_t>(nt * rows));
        matmul_rows_gather(kt, n, w.data(), wrb, r0, r1, xs.data(), nt, yr.data(), rows);
        for (int64_t i = 0; i < nt; ++i)
          std::copy(yr.begin() + i * rows, yr.begin() + (i + 1) * rows, y.begin() + (t0 + nt - 1 - i) * rows);
        check("matmul_rows_gather", t0, nt, r0, r1);
      }
    }
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
    for (GgmlType t : kTypes) v.push_back({t, isa});
  return v;
}

INSTANTIATE_TEST_SUITE_P(TypesIsas, MatmulInvariance, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace strata
