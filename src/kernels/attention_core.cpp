#include "kernels/attention_core.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/assert.h"
#include "base/parallel.h"
#include "kernels/ops.h"

namespace strata {

namespace {

// The online-softmax state of an item's query rows (row = token offset × heads + head offset) and
// the one step every key block takes through it.
struct RowsState {
  RowsState(const AttnShape& s, const float* q_, float* o_, int64_t t0_, int h0_, int nh_)
      : ops(ops_table()),
        q(q_),
        o(o_),
        t0(t0_),
        h0(h0_),
        nh(nh_),
        hdk(s.head_dim_k),
        hdv(s.head_dim_v),
        q_w(int64_t{s.n_head} * s.head_dim_k),
        o_w(int64_t{s.n_head} * s.head_dim_v),
        scale(s.scale) {}
  const OpsTable& ops;  // the per-key kernels, without a dispatch per call
  const float* q;
  float* o;
  const int64_t t0;
  const int h0, nh, hdk, hdv;
  const int64_t q_w, o_w;
  const float scale;
  float m[kAttnMaxRows], l[kAttnMaxRows];
  float sc[kAttnKeyBlock];
  // The key block's K and V rows (the kv head's columns): f32 rows in kf / vf, typed rows
  // (read in place by ops.kv_rows) in kp / vp.
  const float* kf[kAttnKeyBlock];
  const float* vf[kAttnKeyBlock];
  const void* kp[kAttnKeyBlock];
  const void* vp[kAttnKeyBlock];
  GgmlType kt = GgmlType::f32, vt = GgmlType::f32;

  // Key i of the block: row jk of k at byte ko, row jv of v at byte vo.
  void gather(int64_t i, const KvRows& k, int64_t jk, size_t ko, const KvRows& v, int64_t jv, size_t vo) {
    const uint8_t* kr = k.row_ptr(jk) + ko;
    const uint8_t* vr = v.row_ptr(jv) + vo;
    if (k.type == GgmlType::f32)
      kf[i] = reinterpret_cast<const float*>(kr);
    else
      kp[i] = kr;
    if (v.type == GgmlType::f32)
      vf[i] = reinterpret_cast<const float*>(vr);
    else
      vp[i] = vr;
  }

  float* out(int64_t t, int h) const { return o + t * o_w + int64_t{h} * hdv; }

  // Token t's query heads [h0, h0+nh) against the nk keys gathered in kp / vp.
  void step(int64_t t, int64_t nk) {
    const float ninf = -std::numeric_limits<float>::infinity();
    const float sf = scale;  // locals: the stores into s / oh below cannot move them
    const int dk = hdk, dv = hdv;
    float* s = sc;
    for (int g = 0; g < nh; ++g) {
      const int64_t row = (t - t0) * nh + g;
      const int h = h0 + g;
      const float* qh = q + t * q_w + int64_t{h} * dk;
      float* oh = out(t, h);
      float mb = ninf;
      if (kt == GgmlType::f32)
        ops.dot_f32_rows(qh, kf, nk, dk, s);
      else
        ops.kv_rows(kt).dot_rows(qh, kp, nk, dk, s);
      for (int64_t j = 0; j < nk; ++j) {
        s[j] *= sf;
        mb = std::max(mb, s[j]);
      }
      float mr = m[row];
      if (mb > mr) {  // the running max grows: rescale what was accumulated
        const float f = mr == ninf ? 0.0f : expf(mr - mb);
        l[row] *= f;
        for (int i = 0; i < dv; ++i) oh[i] *= f;
        m[row] = mr = mb;
      }
      l[row] += ops.exp_shift_sum(s, nk, mr);  // s[j] = e^(s[j] − m)
      if (vt == GgmlType::f32)
        ops.vec_add_scaled_rows(oh, vf, s, nk, dv);
      else
        ops.kv_rows(vt).add_scaled_rows(oh, vp, s, nk, dv);
    }
  }
};

}  // namespace

int64_t AttnKeys::count() const {
  int64_t c = list.n;
  for (int r = 0; r < n_ranges; ++r) c += std::max<int64_t>(0, ranges[r].j1 - ranges[r].j0);
  return c;
}

AttnKeys causal_keys(const KvRows& k, const KvRows& v, int64_t p, int window) {
  AttnKeys ks;
  ks.ranges[0] = {&k, &v, window > 0 ? std::max<int64_t>(0, p - window + 1) : int64_t{0}, p + 1};
  ks.n_ranges = 1;
  return ks;
}

int64_t attn_query_block(const AttnShape& s) {
  const int group = s.n_head / s.n_head_kv;
  return std::clamp<int64_t>(kAttnMaxRows / group, 1, kAttnQueryBlock);
}

void attend_rows(const AttnShape& s, const float* q, int64_t t0, int64_t t1, int h0, int h1,
                 const AttnKeys* keys, float* o) {
  const int group = s.n_head / s.n_head_kv, hdv = s.head_dim_v;
  const int hk = h0 / group;
  STRATA_ASSERT(t0 < t1 && h0 < h1 && (h1 - 1) / group == hk && (t1 - t0) * (h1 - h0) <= kAttnMaxRows);
  const int64_t k_off = int64_t{hk} * s.head_dim_k, v_off = int64_t{hk} * hdv;
  RowsState st(s, q, o, t0, h0, h1 - h0);
  const float ninf = -std::numeric_limits<float>::infinity();
  int n_ranges = 0;
  for (int64_t t = t0; t < t1; ++t) {
    n_ranges = std::max(n_ranges, keys[t - t0].n_ranges);
    for (int h = h0; h < h1; ++h) {
      const int64_t row = (t - t0) * st.nh + (h - h0);
      st.m[row] = s.sinks ? s.sinks[h] : ninf;  // the sink joins the max and adds e^(sink − max)
      st.l[row] = s.sinks ? 1.0f : 0.0f;
      float* oh = st.out(t, h);
      std::fill(oh, oh + hdv, 0.0f);
    }
  }
  // Ranges: key blocks at absolute multiples of kAttnKeyBlock, each read once while every token
  // of the item that sees part of it passes over it.
  for (int r = 0; r < n_ranges; ++r) {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (int64_t i = 0; i < t1 - t0; ++i) {
      if (r >= keys[i].n_ranges || keys[i].ranges[r].j0 >= keys[i].ranges[r].j1) continue;
      lo = std::min(lo, keys[i].ranges[r].j0);
      hi = std::max(hi, keys[i].ranges[r].j1);
    }
    for (int64_t kb0 = lo < hi ? lo / kAttnKeyBlock * kAttnKeyBlock : hi; kb0 < hi; kb0 += kAttnKeyBlock) {
      for (int64_t t = t0; t < t1; ++t) {
        const AttnKeys& ks = keys[t - t0];
        if (r >= ks.n_ranges) continue;
        const AttnKeyRange& kr = ks.ranges[r];
        const int64_t a = std::max(kb0, kr.j0), b = std::min(kb0 + kAttnKeyBlock, kr.j1);
        if (a >= b) continue;
        const size_t ko = kr.k->col_bytes(k_off), vo = kr.v->col_bytes(v_off);
        for (int64_t j = a; j < b; ++j) st.gather(j - a, *kr.k, j, ko, *kr.v, j, vo);
        st.kt = kr.k->type;
        st.vt = kr.v->type;
        st.step(t, b - a);
      }
    }
  }
  // The gathered list: blocks of kAttnKeyBlock in list order, per token.
  for (int64_t t = t0; t < t1; ++t) {
    const AttnKeyList& kl = keys[t - t0].list;
    if (kl.n <= 0) continue;
    const size_t ko = kl.k->col_bytes(k_off), vo = kl.v->col_bytes(v_off);
    st.kt = kl.k->type;
    st.vt = kl.v->type;
    for (int64_t i0 = 0; i0 < kl.n; i0 += kAttnKeyBlock) {
      const int64_t nk = std::min(kAttnKeyBlock, kl.n - i0);
      for (int64_t i = 0; i < nk; ++i) st.gather(i, *kl.k, kl.idx[i0 + i], ko, *kl.v, kl.idx[i0 + i], vo);
      st.step(t, nk);
    }
  }
  for (int64_t t = t0; t < t1; ++t)
    for (int h = h0; h < h1; ++h) {
      const float lr = st.l[(t - t0) * st.nh + (h - h0)];
      const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;  // no keys and no sink: 0
      float* oh = st.out(t, h);
      for (int i = 0; i < hdv; ++i) oh[i] *= inv;
    }
}

void attend(const AttnShape& s, const float* q, int64_t n, std::span<const AttnKeys> keys, float* o,
            ThreadPool& pool) {
  STRATA_ASSERT(s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0 && static_cast<int64_t>(keys.size()) >= n);
  if (n <= 0) return;
  const int group = s.n_head / s.n_head_kv;
  STRATA_ASSERT(group <= kAttnMaxRows);
  const int64_t qb = attn_query_block(s);
  const int64_t n_qb = (n + qb - 1) / qb, n_blocks = n_qb * s.n_head_kv;
  // Few items (decode): split each kv head's query heads into runs, one per thread.
  const int64_t split = std::clamp<int64_t>((pool.size() + n_blocks - 1) / n_blocks, 1, group);
  int64_t n_keys = 0;
  for (int64_t t = 0; t < n; ++t) n_keys += keys[t].count();
  // Per-head work is tiny for short contexts: only wake the pool when it pays.
  const int64_t work = n_keys * s.n_head * (s.head_dim_k + s.head_dim_v);
  parallel_items(pool, n_blocks * split, work >= kMinParallelWork, [&](int64_t item, int) {
    const int64_t r = item % split, blk = item / split;
    const int64_t b = blk / s.n_head_kv;
    const int hk = static_cast<int>(blk % s.n_head_kv);
    const int h0 = hk * group + static_cast<int>(r * group / split);
    const int h1 = hk * group + static_cast<int>((r + 1) * group / split);
    const int64_t t0 = b * qb;
    attend_rows(s, q, t0, std::min(n, t0 + qb), h0, h1, keys.data() + t0, o);
  });
}

}  // namespace strata
