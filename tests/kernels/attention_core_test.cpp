// kernels/attention_core.h (blocked, one pass, online softmax) against a direct
// double-precision softmax over each query's keys. The decoder's causal key ranges: GQA groups,
// prefill from position 0 and after a cached prefix, decode, a sliding window over a ring cache,
// attention sinks, more keys than one key block, 1 and 2 threads (bit-identical). DeepSeek-V4's
// key sets: a window ring range, a second range and a gathered list in one softmax with sinks;
// empty key sets; a token's bits the same alone, in any chunk and at any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention_core.h"
#include "kernels/kernel_test_data.h"
#include "kernels/sparse_attention.h"
#include "kv/row_cache.h"

namespace strata {
namespace {

struct Case {
  int n_head, n_head_kv, hd_k, hd_v;
  int64_t n, pos0;
  int window;
  bool sinks, ring;
};

std::vector<float> rnd(size_t n, uint32_t seed, float scale) {
  return kernel_test::normal(n, seed, scale);
}

void check(const Case& cs, uint32_t seed) {
  AttnShape c;
  c.n_head = cs.n_head;
  c.n_head_kv = cs.n_head_kv;
  c.head_dim_k = cs.hd_k;
  c.head_dim_v = cs.hd_v;
  c.scale = 1.0f / std::sqrt(static_cast<float>(cs.hd_k));
  const int64_t total = cs.pos0 + cs.n, k_w = int64_t{cs.n_head_kv} * cs.hd_k,
                v_w = int64_t{cs.n_head_kv} * cs.hd_v;
  const int64_t cap = cs.ring ? cs.window + cs.n : total;
  RowCache kc(k_w, cap, cs.ring), vc(v_w, cap, cs.ring);
  const auto kd = rnd(static_cast<size_t>(total * k_w), seed, 2.0f);
  const auto vd = rnd(static_cast<size_t>(total * v_w), seed + 1, 1.0f);
  for (int64_t j = 0; j < total; ++j) {  // a ring keeps only the last `cap` rows
    std::copy(kd.begin() + j * k_w, kd.begin() + (j + 1) * k_w, kc.row(j));
    std::copy(vd.begin() + j * v_w, vd.begin() + (j + 1) * v_w, vc.row(j));
  }
  const auto q = rnd(static_cast<size_t>(cs.n * cs.n_head * cs.hd_k), seed + 2, 2.0f);
  const auto sinks = rnd(static_cast<size_t>(cs.n_head), seed + 3, 2.0f);
  const float* sk = cs.sinks ? sinks.data() : nullptr;
  c.sinks = sk;
  std::vector<AttnKeys> keys;
  for (int64_t t = 0; t < cs.n; ++t)
    keys.push_back(causal_keys(kc.view(), vc.view(), cs.pos0 + t, cs.window));
  const size_t o_n = static_cast<size_t>(cs.n * cs.n_head * cs.hd_v);
  std::vector<float> o1(o_n, -1.0f), o2(o_n, -2.0f);
  ThreadPool p1(1), p2(2);
  attend(c, q.data(), cs.n, keys, o1.data(), p1);
  attend(c, q.data(), cs.n, keys, o2.data(), p2);
  const int group = cs.n_head / cs.n_head_kv;
  for (int64_t t = 0; t < cs.n; ++t) {
    const int64_t p = cs.pos0 + t, j0 = cs.window > 0 ? std::max<int64_t>(0, p - cs.window + 1) : 0;
    for (int h = 0; h < cs.n_head; ++h) {
      const int hk = h / group;
      std::vector<double> s;
      double mx = cs.sinks ? sk[h] : -INFINITY;
      for (int64_t j = j0; j <= p; ++j) {
        double d = 0;
        for (int i = 0; i < cs.hd_k; ++i)
          d += double(q[(t * cs.n_head + h) * cs.hd_k + i]) * kd[j * k_w + hk * cs.hd_k + i];
        s.push_back(d * c.scale);
        mx = std::max(mx, s.back());
      }
      double den = cs.sinks ? std::exp(sk[h] - mx) : 0.0;
      for (double& v : s) den += (v = std::exp(v - mx));
      for (int i = 0; i < cs.hd_v; ++i) {
        double want = 0;
        for (int64_t j = j0; j <= p; ++j) want += s[j - j0] / den * vd[j * v_w + hk * cs.hd_v + i];
        const size_t at = static_cast<size_t>((t * cs.n_head + h) * cs.hd_v + i);
        ASSERT_NEAR(o1[at], want, 2e-5 * (1.0 + std::fabs(want)))
            << "t=" << t << " h=" << h << " i=" << i << " pos0=" << cs.pos0 << " window=" << cs.window;
        ASSERT_EQ(o1[at], o2[at]) << "threads change the result at t=" << t << " h=" << h;
      }
    }
  }
}

TEST(AttentionCore, MatchesDirectSoftmax) {
  const Case cases[] = {
      {4, 2, 8, 8, 13, 0, 0, false, false},     // prefill from 0, GQA 2
      {4, 1, 16, 8, 5, 70, 0, false, false},    // after a prefix, more keys than a key block
      {2, 2, 8, 8, 1, 150, 0, false, false},    // decode over three key blocks
      {8, 2, 8, 16, 20, 40, 16, true, true},    // sliding window on a ring, sinks
      {4, 4, 8, 8, 1, 300, 128, true, true},    // decode with window and sinks
      {16, 4, 64, 64, 64, 0, 0, false, false},  // the synth model's pp64 shape
      {2, 1, 8, 8, 9, 0, 0, true, false},       // sinks from position 0
  };
  uint32_t seed = 1;
  for (const Case& c : cases) check(c, seed += 10);
}

// DeepSeek-V4's key sets per token: its window range of a ring (K = V), a range of a second cache
// from row 0, then gathered rows of that cache (any order, repeats allowed); one token with no
// keys at all. Against the direct softmax, and bit-identical alone / in chunks / at 2 threads.
TEST(AttentionCore, RangesAndGatheredRows) {
  const int hd = 16, n_swa = 70;
  const int64_t n = 19, pos0 = 150, n_comp = 120;
  for (const int n_kv : {1, 2}) {
    for (const bool with_sinks : {true, false}) {
      const int nh = 4 * n_kv;
      const int64_t w = int64_t{n_kv} * hd;
      RowCache win(w, n_swa + n, /*ring=*/true), ck(w, n_comp, false), cv(w, n_comp, false);
      const auto wd = rnd(static_cast<size_t>((pos0 + n) * w), 7, 2.0f);
      const auto kd = rnd(static_cast<size_t>(n_comp * w), 8, 2.0f);
      const auto vd = rnd(static_cast<size_t>(n_comp * w), 9, 1.0f);
      for (int64_t j = 0; j < pos0 + n; ++j)
        std::copy(wd.begin() + j * w, wd.begin() + (j + 1) * w, win.row(j));
      for (int64_t j = 0; j < n_comp; ++j) {
        std::copy(kd.begin() + j * w, kd.begin() + (j + 1) * w, ck.row(j));
        std::copy(vd.begin() + j * w, vd.begin() + (j + 1) * w, cv.row(j));
      }
      std::mt19937 g(11);
      std::vector<std::vector<int32_t>> idx(n);
      std::vector<AttnKeys> keys(n);
      for (int64_t t = 0; t < n; ++t) {
        if (t == 3) continue;  // no keys: the output is 0 (with or without a sink), never NaN
        const int64_t pos = pos0 + t;
        for (int64_t i = 0, ni = int64_t(g() % 90); i < ni; ++i) idx[t].push_back(int32_t(g() % n_comp));
        keys[t].ranges[0] = {&win.view(), &win.view(), std::max<int64_t>(0, pos - n_swa + 1), pos + 1};
        keys[t].ranges[1] = {&ck.view(), &cv.view(), 0, (pos + 1) / 2 - 10};
        keys[t].n_ranges = 2;
        keys[t].list = {&ck.view(), &cv.view(), idx[t].data(), int64_t(idx[t].size())};
      }
      const auto q = rnd(static_cast<size_t>(n * nh * hd), 12, 2.0f);
      const auto sinks = rnd(static_cast<size_t>(nh), 13, 2.0f);
      AttnShape c{nh, n_kv, hd, hd, 1.0f / std::sqrt(float(hd)), with_sinks ? sinks.data() : nullptr};
      const size_t o_n = static_cast<size_t>(n * nh * hd);
      std::vector<float> all(o_n, -1.0f), one(o_n, -2.0f), chunks(o_n, -3.0f);
      ThreadPool p1(1), p2(2);
      attend(c, q.data(), n, keys, all.data(), p2);
      for (int64_t t = 0; t < n; ++t)  // alone, the kv head's query heads split into runs
        attend(c, q.data() + t * nh * hd, 1, std::span<const AttnKeys>(&keys[t], 1), one.data() + t * nh * hd,
               p2);
      for (int64_t t = 0; t < n; t += 5) {
        const int64_t m = std::min<int64_t>(5, n - t);
        attend(c, q.data() + t * nh * hd, m, std::span<const AttnKeys>(&keys[t], size_t(m)),
               chunks.data() + t * nh * hd, p1);
      }
      for (int64_t t = 0; t < n; ++t)
        for (int h = 0; h < nh; ++h) {
          const int64_t col = int64_t{h / 4} * hd;                // the kv head's columns
          std::vector<std::pair<const float*, const float*>> kv;  // (k, v) in key-set order
          if (t != 3) {
            const int64_t pos = pos0 + t;
            for (int64_t j = std::max<int64_t>(0, pos - n_swa + 1); j <= pos; ++j)
              kv.emplace_back(&wd[j * w + col], &wd[j * w + col]);
            for (int64_t j = 0; j < (pos + 1) / 2 - 10; ++j)
              kv.emplace_back(&kd[j * w + col], &vd[j * w + col]);
            for (int32_t j : idx[t]) kv.emplace_back(&kd[j * w + col], &vd[j * w + col]);
          }
          double mx = with_sinks ? sinks[h] : -INFINITY;
          std::vector<double> sc;
          for (auto& [kp, vp] : kv) {
            double d = 0;
            for (int i = 0; i < hd; ++i) d += double(q[(t * nh + h) * hd + i]) * kp[i];
            sc.push_back(d * c.scale);
            mx = std::max(mx, sc.back());
          }
          double den = with_sinks ? std::exp(sinks[h] - mx) : 0.0;
          for (double& v : sc) den += (v = std::exp(v - mx));
          for (int i = 0; i < hd; ++i) {
            double want = 0;
            for (size_t j = 0; j < kv.size(); ++j) want += sc[j] / den * kv[j].second[i];
            const size_t at = static_cast<size_t>((t * nh + h) * hd + i);
            ASSERT_NEAR(all[at], want, 2e-5 * (1.0 + std::fabs(want)))
                << "t=" << t << " h=" << h << " i=" << i;
            ASSERT_EQ(all[at], one[at]) << "alone differs at t=" << t << " h=" << h;
            ASSERT_EQ(all[at], chunks[at]) << "chunked differs at t=" << t << " h=" << h;
          }
        }
      // a huge sink swallows the mass (output -> 0) but never produces NaN
      const std::vector<float> big(size_t(nh), 80.0f);
      c.sinks = big.data();
      attend(c, q.data(), n, keys, all.data(), p2);
      for (float v : all) ASSERT_LT(std::fabs(v), 1e-20f);
    }
  }
}

// DeepSeek-V4's op over typed rows (kernels/sparse_attention.h) carves at most what
// sparse_attention_scratch_bytes prices (deepseek4's arena adds it): an arena of exactly that
// size does not overflow. fp8 / mxfp4 rows (converted to f32, rotated) and f32; a CSA layer with a
// selection, an HCA layer over every visible row, a window-only layer; prefill after a prefix.
TEST(SparseAttentionScratch, PricedBytesHoldTheStep) {
  const int hd = 64, nh = 4, window = 8;
  const int64_t pos0 = 40, n = 24, end = pos0 + n;
  for (GgmlType t : {GgmlType::f32, GgmlType::fp8_e4m3, GgmlType::mxfp4})
    for (int ratio : {0, 4, 128}) {
      const int64_t stride = ratio == 4 ? 5 : 0, n_comp = end / std::max(ratio, 1);
      const int64_t win_cap = window - 1 + n;
      RowCache win(hd, win_cap, true, t), comp(hd, std::max<int64_t>(n_comp, 1), false, t);
      const bool rot = t != GgmlType::f32;
      win.set_hadamard(rot);
      comp.set_hadamard(rot);
      const std::vector<float> q = rnd(static_cast<size_t>(n * nh * hd), 1, 1.0f);
      const std::vector<float> kv = rnd(static_cast<size_t>(n * hd), 2, 1.0f);
      const std::vector<float> old = rnd(static_cast<size_t>((window + n_comp) * hd), 3, 1.0f);
      for (int64_t p = pos0 - window + 1; p < pos0; ++p)
        kv_store(win.view(), p, 0, old.data() + (p % window) * hd, hd);
      for (int64_t j = 0; ratio && j < n_comp; ++j) kv_store(comp.view(), j, 0, old.data() + j * hd, hd);
      std::vector<int32_t> sel(static_cast<size_t>(n * stride + 1)), sel_n(static_cast<size_t>(n));
      for (int64_t i = 0; i < n && stride; ++i) {
        const int64_t vis = (pos0 + i + 1) / ratio, k = std::min(vis, stride);
        for (int64_t j = 0; j < k; ++j) sel[i * stride + j] = static_cast<int32_t>(vis - k + j);
        sel_n[i] = static_cast<int32_t>(k);
      }
      std::vector<float> out(static_cast<size_t>(n * nh * hd));
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
      w.out = out.data();
      if (stride) {
        w.sel = sel.data();
        w.sel_n = sel_n.data();
        w.sel_stride = stride;
      }
      const uint64_t price = sparse_attention_scratch_bytes(n, hd, nh, window, ratio, stride, end, t, rot);
      Arena arena(price);
      ThreadPool pool(1);
      sparse_attention(w, win.view(), ratio ? &comp.view() : nullptr, nullptr, pool, arena);
      arena.reset();
      EXPECT_EQ(arena.capacity(), Arena::capacity_for(price))
          << type_name(t) << " ratio " << ratio << ": the op carved more than its price " << price;
    }
}

}  // namespace
}  // namespace strata
