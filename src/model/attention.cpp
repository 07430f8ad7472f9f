#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/assert.h"
#include "model/linear.h"

namespace strata {

namespace {

constexpr int64_t kKeyBlock = 64;       // keys per pass: a head's K and V block stay in L1
constexpr int64_t kQueryBlock = 8;      // tokens per work item (fewer when the group is large)
constexpr int64_t kMaxItemRows = 1024;  // query rows (tokens × group heads) per item

// Queries t in [t0, t1) of the heads of kv head hk against their visible keys, key block by key
// block (attention_core).
void attend_item(const AttnConfig& c, const float* q, int64_t t0, int64_t t1, int hk, int64_t pos0,
                 const RowCache& kc, const RowCache& vc, const float* sinks, float* o) {
  const int group = c.n_head / c.n_head_kv, hdk = c.head_dim_k, hdv = c.head_dim_v;
  const int64_t q_w = int64_t{c.n_head} * hdk, o_w = int64_t{c.n_head} * hdv;
  float m[kMaxItemRows], l[kMaxItemRows], s[kKeyBlock];
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t t = t0; t < t1; ++t)
    for (int g = 0; g < group; ++g) {
      const int64_t row = (t - t0) * group + g;
      const int h = hk * group + g;
      m[row] = sinks ? sinks[h] : ninf;  // the sink joins the max and adds exp(sink − max)
      l[row] = sinks ? 1.0f : 0.0f;
      float* oh = o + t * o_w + int64_t{h} * hdv;
      std::fill(oh, oh + hdv, 0.0f);
    }
  auto first_key = [&](int64_t p) {
    return c.window > 0 ? std::max<int64_t>(0, p - c.window + 1) : int64_t{0};
  };
  const int64_t jlo = first_key(pos0 + t0), jhi = pos0 + t1 - 1;
  for (int64_t kb0 = jlo; kb0 <= jhi; kb0 += kKeyBlock) {
    const int64_t kb1 = std::min(jhi + 1, kb0 + kKeyBlock);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p = pos0 + t, a = std::max(kb0, first_key(p)), b = std::min(kb1 - 1, p);
      if (a > b) continue;
      for (int g = 0; g < group; ++g) {
        const int64_t row = (t - t0) * group + g;
        const int h = hk * group + g;
        const float* qh = q + t * q_w + int64_t{h} * hdk;
        float mb = ninf;
        for (int64_t j = a; j <= b; ++j) {
          s[j - a] = dot_f32(qh, kc.row(j) + int64_t{hk} * hdk, hdk) * c.scale;
          mb = std::max(mb, s[j - a]);
        }
        float* oh = o + t * o_w + int64_t{h} * hdv;
        if (mb > m[row]) {  // the running max grows: rescale what was accumulated
          const float f = m[row] == ninf ? 0.0f : expf(m[row] - mb);
          l[row] *= f;
          for (int i = 0; i < hdv; ++i) oh[i] *= f;
          m[row] = mb;
        }
        float sum = 0.0f;
        for (int64_t j = a; j <= b; ++j) {
          const float e = expf(s[j - a] - m[row]);
          sum += e;
          vec_add_scaled(oh, vc.row(j) + int64_t{hk} * hdv, e, hdv);
        }
        l[row] += sum;
      }
    }
  }
  for (int64_t t = t0; t < t1; ++t)
    for (int g = 0; g < group; ++g) {
      const float inv = 1.0f / l[(t - t0) * group + g];
      float* oh = o + t * o_w + int64_t{hk * group + g} * hdv;
      for (int i = 0; i < hdv; ++i) oh[i] *= inv;
    }
}

}  // namespace

void attention_core(const AttnConfig& c, const float* q, int64_t n, int64_t pos0, const RowCache& kc,
                    const RowCache& vc, const float* sinks, float* o, ThreadPool& pool) {
  STRATA_ASSERT(c.n_head_kv > 0 && c.n_head % c.n_head_kv == 0);
  const int group = c.n_head / c.n_head_kv;
  STRATA_ASSERT(group <= kMaxItemRows);
  const int64_t qb = std::clamp<int64_t>(kMaxItemRows / group, 1, kQueryBlock);
  const int64_t n_qb = (n + qb - 1) / qb, n_items = n_qb * c.n_head_kv;
  const int64_t max_keys = c.window > 0 ? std::min<int64_t>(c.window, pos0 + n) : pos0 + n;
  // Per-head work is tiny for short contexts: only wake the pool when it pays.
  const int64_t work = n * c.n_head * max_keys * (c.head_dim_k + c.head_dim_v);
  parallel_items(pool, n_items, work >= kMinParallelWork, [&](int64_t item, int) {
    const int64_t b = item / c.n_head_kv;
    const int hk = static_cast<int>(item % c.n_head_kv);
    attend_item(c, q, b * qb, std::min(n, (b + 1) * qb), hk, pos0, kc, vc, sinks, o);
  });
}

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

  float* o = arena.alloc<float>(n * o_w);  // [n][n_head][hd_v]
  attention_core(c, q, n, pos0, kc, vc, w.sinks, o, pool);

  linear(pool, arena, *w.wo, o, n, out, w.bo);
}

}  // namespace strata
