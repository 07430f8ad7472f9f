// Router look-ahead (memory/prefetch.h): the predicted experts are the top-k of the router's logits
// computed here from the file in double precision, and --lookahead-top M keeps the best M of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "memory/experts/prefetch.h"
#include "memory/store_test_util.h"
#include "quant/quant_ref.h"

namespace strata {
namespace {

TEST(RouterLookahead, TopKAndTopMOfTheRouterLogits) {
  const int L = 3, E = 16, K = 4;
  SynthModelFile sm("prefetch", L, E, K, "q8_0");
  auto r = RouterLookahead::build(*sm.file, L, E, K);
  ASSERT_TRUE(r.ok()) << r.message();
  const int d = r->n_embd();
  std::mt19937 rng(9);
  std::normal_distribution<float> g;
  std::vector<float> x(static_cast<size_t>(d)), row(static_cast<size_t>(d));
  for (int rep = 0; rep < 20; ++rep) {
    for (float& v : x) v = g(rng);
    const int l = rep % L;
    const TensorView* w = sm.file->find_tensor("blk." + std::to_string(l) + ".ffn_gate_inp.weight");
    ASSERT_TRUE(w);
    std::vector<double> logit(E);
    for (int e = 0; e < E; ++e) {
      quant_ref(w->type)->to_float(w->row(e), row.data(), d);
      logit[e] = 0;
      for (int i = 0; i < d; ++i) logit[e] += double(row[i]) * x[i];
    }
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logit[a] > logit[b]; });
    for (int top : {0, 1, 2, K, K + 3}) {
      const int m = top > 0 && top < K ? top : K;
      std::vector<uint8_t> mark(E, 0);
      r->predict(l, x.data(), 1, mark.data(), top);
      EXPECT_EQ(std::count(mark.begin(), mark.end(), 1), m) << "top " << top;
      for (int j = 0; j < m; ++j) {
        // float vs double sums: only a near-tie at the boundary may differ
        if (j == m - 1 && m < E && logit[order[m - 1]] - logit[order[m]] < 1e-4) continue;
        EXPECT_EQ(mark[order[j]], 1) << "layer " << l << " top " << top << " rank " << j;
      }
    }
  }
  // Several tokens: the union of their predictions.
  std::vector<float> two(2 * static_cast<size_t>(d));
  for (float& v : two) v = g(rng);
  std::vector<uint8_t> a(E, 0), b(E, 0), both(E, 0);
  r->predict(1, two.data(), 1, a.data(), 2);
  r->predict(1, two.data() + d, 1, b.data(), 2);
  r->predict(1, two.data(), 2, both.data(), 2);
  for (int e = 0; e < E; ++e) EXPECT_EQ(both[e], a[e] | b[e]) << e;
}

}  // namespace
}  // namespace strata
