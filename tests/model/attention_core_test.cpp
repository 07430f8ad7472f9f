// model/attention.h attention_core (blocked, one pass, online softmax) against a direct
// double-precision softmax over each query's visible keys: GQA groups, prefill from position 0
// and after a cached prefix, decode, a sliding window over a ring cache, attention sinks, more
// keys than one key block, 1 and 2 threads (bit-identical).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/blocks/attention.h"

namespace strata {
namespace {

struct Case {
  int n_head, n_head_kv, hd_k, hd_v;
  int64_t n, pos0;
  int window;
  bool sinks, ring;
};

std::vector<float> rnd(size_t n, uint32_t seed, float scale) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

void check(const Case& cs, uint32_t seed) {
  AttnConfig c;
  c.n_head = cs.n_head;
  c.n_head_kv = cs.n_head_kv;
  c.head_dim_k = cs.hd_k;
  c.head_dim_v = cs.hd_v;
  c.window = cs.window;
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
  const size_t o_n = static_cast<size_t>(cs.n * cs.n_head * cs.hd_v);
  std::vector<float> o1(o_n, -1.0f), o2(o_n, -2.0f);
  ThreadPool p1(1), p2(2);
  attention_core(c, q.data(), cs.n, cs.pos0, kc, vc, sk, o1.data(), p1);
  attention_core(c, q.data(), cs.n, cs.pos0, kc, vc, sk, o2.data(), p2);
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

}  // namespace
}  // namespace strata
