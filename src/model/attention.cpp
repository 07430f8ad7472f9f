#include "model/attention.h"

#include <algorithm>
#include <cstring>

#include "base/assert.h"
#include "model/linear.h"

namespace strata {

void attention_forward(const AttnConfig& c, const AttnWeights& w, KvLayer& kv, const float* x, int64_t n,
                       int64_t pos0, float* out, ThreadPool& pool, Arena& arena) {
  const int64_t q_w = int64_t{c.n_head} * c.head_dim_k;
  const int64_t k_w = int64_t{c.n_head_kv} * c.head_dim_k;
  const int64_t v_w = int64_t{c.n_head_kv} * c.head_dim_v;
  const int64_t o_w = int64_t{c.n_head} * c.head_dim_v;
  const int ki = kv.find(KvPartKind::kv_part_k), vi = kv.find(KvPartKind::kv_part_v);
  STRATA_ASSERT(ki >= 0 && vi >= 0);
  RowCache& kc = kv.part(ki);
  RowCache& vc = kv.part(vi);
  STRATA_ASSERT(kc.width() == k_w && vc.width() == v_w);

  float* q = arena.alloc<float>(n * q_w);  // [n][n_head][hd_k]
  float* k = arena.alloc<float>(n * k_w);  // [n][n_head_kv][hd_k]
  float* v = arena.alloc<float>(n * v_w);  // [n][n_head_kv][hd_v]
  const LinearOut qkv[3] = {{w.wq, q, w.bq}, {w.wk, k, w.bk}, {w.wv, v, w.bv}};
  linear_multi(pool, arena, qkv, 3, x, n);  // one pool region for the three projections

  // Per-head q/k norm, then RoPE with one cos/sin table per position.
  const int n_rot = c.rope.n_rot;
  float* cache = arena.alloc<float>(n_rot);
  for (int64_t t = 0; t < n; ++t) {
    rope_cache(c.rope, pos0 + t, 1.0f, cache);
    for (int h = 0; h < c.n_head; ++h) {
      float* qh = q + t * q_w + int64_t{h} * c.head_dim_k;
      if (w.q_norm) rms_norm(qh, w.q_norm, qh, c.head_dim_k, c.eps);
      rope_apply(c.rope_style, n_rot, cache, qh);
    }
    for (int h = 0; h < c.n_head_kv; ++h) {
      float* kh = k + t * k_w + int64_t{h} * c.head_dim_k;
      if (w.k_norm) rms_norm(kh, w.k_norm, kh, c.head_dim_k, c.eps);
      rope_apply(c.rope_style, n_rot, cache, kh);
    }
    std::memcpy(kc.row(pos0 + t), k + t * k_w, sizeof(float) * k_w);
    std::memcpy(vc.row(pos0 + t), v + t * v_w, sizeof(float) * v_w);
  }

  // Scores per (token, head): one row of at most window / pos0+n keys per thread.
  const int nt = pool.size();
  const int64_t max_keys = c.window > 0 ? std::min<int64_t>(c.window, pos0 + n) : pos0 + n;
  float* scores_all = arena.alloc<float>(int64_t{nt} * max_keys);
  float* o = arena.alloc<float>(n * o_w);  // [n][n_head][hd_v]
  const int group = c.n_head / c.n_head_kv;
  const int64_t n_items = n * c.n_head;
  auto body = [&](int ti, int nti) {
    float* s = scores_all + int64_t{ti} * max_keys;
    const int64_t b = n_items * ti / nti, e = n_items * (ti + 1) / nti;
    for (int64_t it = b; it < e; ++it) {
      const int64_t t = it / c.n_head;
      const int h = static_cast<int>(it % c.n_head);
      const int hk = h / group;
      const int64_t p = pos0 + t;
      const int64_t j0 = c.window > 0 ? std::max<int64_t>(0, p - c.window + 1) : 0;
      const int64_t nk = p - j0 + 1;
      const float* qh = q + t * q_w + int64_t{h} * c.head_dim_k;
      for (int64_t j = 0; j < nk; ++j)
        s[j] = dot_f32(qh, kc.row(j0 + j) + int64_t{hk} * c.head_dim_k, c.head_dim_k);
      softmax_scaled(s, nk, c.scale, nullptr, w.sinks ? w.sinks + h : nullptr);
      float* oh = o + t * o_w + int64_t{h} * c.head_dim_v;
      std::fill(oh, oh + c.head_dim_v, 0.0f);
      for (int64_t j = 0; j < nk; ++j)
        vec_add_scaled(oh, vc.row(j0 + j) + int64_t{hk} * c.head_dim_v, s[j], c.head_dim_v);
    }
  };
  // Per-head work is tiny for short contexts: only wake the pool when it pays.
  const int64_t work = n_items * max_keys * (c.head_dim_k + c.head_dim_v);
  if (nt > 1 && work >= (int64_t{1} << 18)) {
    pool.run(body);
  } else {
    body(0, 1);
  }

  linear(pool, arena, *w.wo, o, n, out, w.bo);
}

}  // namespace strata
