// DeepSeek-V4's attention key sets (kernels/sparse_attention.h; the softmax is attention_core_test's)
// and its typed rows converted once (the in-place core's bits),
// sqrt-softplus and hash routing vs double-precision code written from deepseek-v4.md §2.3 and §2.4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "base/arena.h"
#include "base/thread_pool.h"
#include "kernels/kv_rows.h"
#include "kernels/sparse_attention.h"
#include "kv/row_cache.h"
#include "model/deepseek4/ds4_moe.h"
#include "model/ds4_test_util.h"

namespace strata::ds4 {
namespace {

using testing::randn;

// Which rows a query attends (README §6): window rows max(0, p − n_swa + 1) .. p; ratio 128 every
// compressed entry j < floor((p+1)/128); ratio 4 the indexer's selection, as given.
TEST(Ds4Attention, KeySets) {
  const int hd = 8, n_swa = 128;
  RowCache window(hd, n_swa + 4, /*ring=*/true), comp(hd, 8, false);
  const int32_t sel[3] = {0, 5, 7};
  AttnKeys k = sparse_keys(window.view(), n_swa, nullptr, 0, 5, nullptr, 0);
  ASSERT_EQ(k.n_ranges, 1);
  EXPECT_EQ(k.ranges[0].k, &window.view());
  EXPECT_EQ(k.ranges[0].v, &window.view());  // K = V
  EXPECT_EQ(k.ranges[0].j0, 0);
  EXPECT_EQ(k.ranges[0].j1, 6);
  EXPECT_EQ(k.list.n, 0);
  k = sparse_keys(window.view(), n_swa, &comp.view(), 128, 300, nullptr, 0);
  ASSERT_EQ(k.n_ranges, 2);
  EXPECT_EQ(k.ranges[0].j0, 300 - 128 + 1);
  EXPECT_EQ(k.ranges[0].j1, 301);
  EXPECT_EQ(k.ranges[1].k, &comp.view());
  EXPECT_EQ(k.ranges[1].j0, 0);
  EXPECT_EQ(k.ranges[1].j1, 2);  // floor(301 / 128)
  EXPECT_EQ(sparse_keys(window.view(), n_swa, &comp.view(), 128, 254, nullptr, 0).ranges[1].j1, 1);
  EXPECT_EQ(sparse_keys(window.view(), n_swa, &comp.view(), 128, 255, nullptr, 0).ranges[1].j1, 2);
  EXPECT_EQ(k.count(), 128 + 2);
  k = sparse_keys(window.view(), n_swa, &comp.view(), 4, 40, sel, 3);
  ASSERT_EQ(k.n_ranges, 1);
  EXPECT_EQ(k.list.k, &comp.view());
  EXPECT_EQ(k.list.idx, sel);
  EXPECT_EQ(k.list.n, 3);
  EXPECT_EQ(k.count(), 41 + 3);
}

// Typed rows read as f32 (f16, fp8_e4m3, mxfp4): sparse_attention converts each row a chunk of
// tokens reads once and gives the bits of the core reading the typed rows in place (sparse_keys
// and attend), over more tokens than a chunk, with an indexer's selection (ratio 4) and without.
TEST(Ds4Attention, TypedRowsConvertedOnceKeepTheInPlaceBits) {
  const int hd = 64, nh = 4, window = 16;
  const int64_t pos0 = 40, n = 150;
  ThreadPool pool(2);
  Arena arena(1 << 16);
  for (GgmlType t : {GgmlType::f16, GgmlType::fp8_e4m3, GgmlType::mxfp4})
    for (int ratio : {4, 8}) {
      SCOPED_TRACE(std::string(type_name(t)) + " ratio " + std::to_string(ratio));
      const int64_t wcap = window - 1 + n, ccap = (pos0 + n) / ratio, c0 = pos0 / ratio;
      std::vector<uint8_t> wb(row_bytes(t, hd) * wcap), cb(row_bytes(t, hd) * ccap);
      const KvRows win = KvRows::typed(wb.data(), hd, wcap, true, t);
      const KvRows comp = KvRows::typed(cb.data(), hd, ccap, false, t);
      const std::vector<float> hist = randn(static_cast<size_t>((window + c0) * hd), 1);
      for (int64_t j = pos0 - window + 1; j < pos0; ++j)
        kv_store(win, j, 0, hist.data() + (pos0 - j) * hd, hd);
      for (int64_t j = 0; j < c0; ++j) kv_store(comp, j, 0, hist.data() + (window + j) * hd, hd);
      const std::vector<float> q = randn(static_cast<size_t>(n * nh * hd), 2),
                               kv = randn(static_cast<size_t>(n * hd), 3),
                               cnew = randn(static_cast<size_t>((ccap - c0) * hd), 4), sinks = randn(nh, 5);
      const int64_t k = 6;  // the indexer's choice: k rows spread over the visible ones, ascending
      std::vector<int32_t> sel(static_cast<size_t>(n * k)), sel_n(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t vis = (pos0 + i + 1) / ratio, step = std::max<int64_t>(1, vis / k);
        sel_n[i] = static_cast<int32_t>(std::min(k, vis));
        for (int64_t s = 0; s < sel_n[i]; ++s) sel[i * k + s] = static_cast<int32_t>(s * step + i % step);
      }
      DeviceSparseAttnWork w;
      w.n_head = nh;
      w.head_dim = hd;
      w.window = window;
      w.ratio = ratio;
      w.scale = 0.125f;
      w.pos0 = pos0;
      w.n = n;
      w.q = q.data();
      w.kv_new = kv.data();
      w.comp_new = cnew.data();
      w.comp_row0 = c0;
      w.n_comp_new = ccap - c0;
      if (ratio == 4) {
        w.sel = sel.data();
        w.sel_n = sel_n.data();
        w.sel_stride = k;
      }
      std::vector<float> out(q.size()), want(q.size());
      w.out = out.data();
      sparse_attention(w, win, &comp, sinks.data(), pool, arena);
      std::vector<AttnKeys> keys;
      for (int64_t i = 0; i < n; ++i)
        keys.push_back(sparse_keys(win, window, &comp, ratio, pos0 + i, w.sel ? sel.data() + i * k : nullptr,
                                   w.sel ? sel_n[i] : 0));
      attend(AttnShape{nh, 1, hd, hd, w.scale, sinks.data()}, q.data(), n, keys, want.data(), pool);
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(std::memcmp(&out[i], &want[i], sizeof(float)), 0)
            << i << ": " << out[i] << " vs " << want[i];
    }
}

TEST(Ds4Moe, SqrtSoftplusScores) {
  const float x[6] = {-30.0f, -1.0f, 0.0f, 1.0f, 19.9f, 25.0f};
  float s[6];
  sqrt_softplus_scores(x, 6, s);
  for (int i = 0; i < 6; ++i) {
    const double ref = std::sqrt(std::log1p(std::exp(double(x[i]))));
    EXPECT_NEAR(s[i], ref, 1e-6 * std::max(1.0, ref)) << x[i];
  }
}

TEST(Ds4Moe, BiasSelectsButWeightsUseUnbiasedScores) {
  const int ne = 8, k = 4;
  auto logits = randn(ne, 71, 2.0f);
  std::vector<float> s(ne);
  sqrt_softplus_scores(logits.data(), ne, s.data());
  std::vector<float> bias(ne, 0.0f);
  // push expert with the lowest score into the selection via the bias
  const int lowest = int(std::min_element(s.begin(), s.end()) - s.begin());
  bias[lowest] = 100.0f;
  int32_t ids[k];
  float w[k];
  route_topk(s.data(), bias.data(), ne, k, /*norm_w=*/true, /*scale=*/1.5f, ids, w);
  EXPECT_EQ(ids[0], lowest);
  std::vector<int> order(ne);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] + bias[a] > s[b] + bias[b]; });
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += s[order[i]];
  for (int i = 0; i < k; ++i) {
    EXPECT_EQ(ids[i], order[i]);
    EXPECT_NEAR(w[i], s[order[i]] / sum * 1.5, 1e-6);
  }
  // without normalisation the weights are scale * score
  route_topk(s.data(), nullptr, ne, k, false, 2.0f, ids, w);
  for (int i = 0; i < k; ++i) EXPECT_NEAR(w[i], 2.0 * s[ids[i]], 1e-6);
}

TEST(Ds4Moe, HashRoutingWeights) {
  const float s[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  const int32_t ids[4] = {7, 0, 3, 3};  // tid2eid row (duplicates allowed in the table)
  float w[4];
  route_weights(s, ids, 4, true, 1.5f, w);
  const double sum = 0.8 + 0.1 + 0.4 + 0.4;
  EXPECT_NEAR(w[0], 0.8 / sum * 1.5, 1e-6);
  EXPECT_NEAR(w[1], 0.1 / sum * 1.5, 1e-6);
  EXPECT_NEAR(w[2], 0.4 / sum * 1.5, 1e-6);
  // tiny sums are clamped (no division blow-up)
  const float z[2] = {0.0f, 0.0f};
  const int32_t i2[2] = {0, 1};
  route_weights(z, i2, 2, true, 1.0f, w);
  EXPECT_EQ(w[0], 0.0f);
}

}  // namespace
}  // namespace strata::ds4
