// Lightning indexer: Hadamard rotation, scores and top-k vs equations (deepseek-v4.md §2.3.4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/deepseek4/ds4_indexer.h"
#include "model/ds4_test_util.h"

namespace strata::ds4 {
namespace {

using testing::randn;

TEST(Ds4Hadamard, BlockSizeLikeLlamaCpp) {
  EXPECT_EQ(hadamard_block(64), 64);
  EXPECT_EQ(hadamard_block(128), 128);
  EXPECT_EQ(hadamard_block(192), 64);
  EXPECT_EQ(hadamard_block(512), 512);
  EXPECT_EQ(hadamard_block(32), 0);
}

TEST(Ds4Hadamard, IsOrthonormalAndSymmetric) {
  for (int n : {64, 128}) {
    auto H = hadamard_matrix(n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        double dot = 0;
        for (int k = 0; k < n; ++k) dot += double(H[i * n + k]) * H[j * n + k];
        EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-6);
        EXPECT_EQ(H[i * n + j], H[j * n + i]);
        EXPECT_NEAR(std::fabs(H[i * n + j]), 1.0 / std::sqrt(double(n)), 1e-7);
      }
  }
}

double ref_score(const std::vector<float>& q, const std::vector<float>& w, const float* k, int ih, int ihd) {
  double s = 0;
  for (int h = 0; h < ih; ++h) {
    double dot = 0;
    for (int i = 0; i < ihd; ++i) dot += double(q[h * ihd + i]) * k[i];
    s += w[h] * std::max(0.0, dot);
  }
  return s;
}

TEST(Ds4Indexer, ScoresMatchEquationAndRotationIsANoOp) {
  const int ih = 16, ihd = 64, nk = 40;
  auto q = randn(ih * ihd, 31);
  auto w = randn(ih, 32);
  auto k = randn(nk * ihd, 33);
  std::vector<float> sc(nk), sc_rot(nk);
  indexer_scores(q.data(), w.data(), k.data(), nk, ih, ihd, sc.data());
  for (int s = 0; s < nk; ++s) {
    const double ref = ref_score(q, w, k.data() + s * ihd, ih, ihd);
    EXPECT_NEAR(sc[s], ref, 1e-4 * std::max(1.0, std::fabs(ref))) << s;
  }
  // rotate queries (each head) and keys with the same orthonormal H: scores unchanged
  const int n = hadamard_block(ihd);
  auto H = hadamard_matrix(n);
  auto qr = q, kr = k;
  hadamard_rotate(H.data(), n, qr.data(), int64_t(qr.size()));
  hadamard_rotate(H.data(), n, kr.data(), int64_t(kr.size()));
  indexer_scores(qr.data(), w.data(), kr.data(), nk, ih, ihd, sc_rot.data());
  for (int s = 0; s < nk; ++s) EXPECT_NEAR(sc_rot[s], sc[s], 1e-4 * std::max(1.0f, std::fabs(sc[s]))) << s;
  // and H*H = I: rotating twice gives back the input
  hadamard_rotate(H.data(), n, qr.data(), int64_t(qr.size()));
  for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(qr[i], q[i], 1e-5);
}

TEST(Ds4Indexer, TopKOverVisibleEntries) {
  auto sc = randn(80, 41);
  sc[10] = sc[11] = 5.0f;  // a tie: lower index first
  std::vector<int32_t> idx(80), scratch(80);
  const int64_t n_vis = 70;  // entries 70.. are not visible yet: only the prefix is ranked
  const int64_t k = topk_indices(sc.data(), n_vis, 16, idx.data(), scratch.data());
  ASSERT_EQ(k, 16);
  std::vector<int32_t> order(n_vis);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return sc[a] > sc[b]; });
  for (int i = 0; i < 16; ++i) EXPECT_EQ(idx[i], order[i]) << i;
  EXPECT_EQ(idx[0], 10);
  EXPECT_EQ(idx[1], 11);
  for (int i = 0; i < 16; ++i) EXPECT_LT(idx[i], n_vis);
  // fewer visible than top_k: all of them
  EXPECT_EQ(topk_indices(sc.data(), 5, 16, idx.data(), scratch.data()), 5);
  std::sort(idx.begin(), idx.begin() + 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(idx[i], i);
  EXPECT_EQ(topk_indices(sc.data(), 0, 16, idx.data(), scratch.data()), 0);
}

}  // namespace
}  // namespace strata::ds4
