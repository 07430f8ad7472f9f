#include "kernels/attention_block.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <new>

#include "base/assert.h"
#include "kernels/linear.h"

namespace strata {

namespace {

AttnShape attn_shape(const AttnConfig& c, const float* sinks) {
  return {c.n_head, c.n_head_kv, c.head_dim_k, c.head_dim_v, c.scale, sinks};
}

}  // namespace

// One pool region for the whole block, items claimed in this order (each waits only on earlier
// items, so a thread only ever waits for work another thread is already running):
//   1. k/v/q row blocks (LinearPlan items)
//   then per kv head:
//   2. q/k norm and RoPE of its heads, its K/V slices written to the cache rows (waits for the
//      row blocks holding those heads)
//   3. its attention items (query block, kv head): attention_core.h's attend_rows over each
//      query's causal / window range (wait for its step 2; with one query block, as in decode,
//      steps 2 and 3 are one item); the item that completes a query block's heads converts its
//      o rows for the output weight
//   4. output projection row blocks (wait for every query block's conversion)
// Each wait is a point where one thread may stall on the other, so there are few of them.
// Every value is the same call on the same rows whatever thread runs it, so the result does
// not depend on the thread count; decode's attention, too small for a region of its own, now
// runs on both threads between the projections.
void attention_forward_segments(const AttnConfig& c, const AttnWeights& w, std::span<const AttnSegment> segs,
                                const float* x, int64_t n, float* out, ThreadPool& pool, Arena& arena) {
  if (n <= 0) return;
  const int hdk = c.head_dim_k, hdv = c.head_dim_v, n_kv = c.n_head_kv;
  const int64_t q_w = int64_t{c.n_head} * hdk;
  const int64_t k_w = int64_t{n_kv} * hdk;
  const int64_t v_w = int64_t{n_kv} * hdv;
  const int64_t o_w = int64_t{c.n_head} * hdv;
  STRATA_ASSERT(!segs.empty());
  const int n_seg = static_cast<int>(segs.size());
  int64_t covered = 0;
  for (int s = 0; s < n_seg; ++s) {
    STRATA_ASSERT(segs[s].k && segs[s].v);
    STRATA_ASSERT(segs[s].k->width == k_w && segs[s].v->width == v_w);
    STRATA_ASSERT(kv_rows_type_ok(segs[s].k->type) && kv_rows_type_ok(segs[s].v->type));
    STRATA_ASSERT(hdk % type_info(segs[s].k->type).block_size == 0 &&
                  hdv % type_info(segs[s].v->type).block_size == 0);
    STRATA_ASSERT(segs[s].t0 == covered && segs[s].n >= 1);
    covered += segs[s].n;
  }
  STRATA_ASSERT(covered == n);
  STRATA_ASSERT(n_kv > 0 && c.n_head % n_kv == 0);
  const int group = c.n_head / n_kv;
  STRATA_ASSERT(group <= kAttnMaxRows);
  const AttnShape shape = attn_shape(c, w.sinks);

  float* q = arena.alloc<float>(n * q_w);  // [n][n_head][hd_k]
  float* k = arena.alloc<float>(n * k_w);  // [n][n_head_kv][hd_k]
  float* v = arena.alloc<float>(n * v_w);  // [n][n_head_kv][hd_v]
  float* o = arena.alloc<float>(n * o_w);  // [n][n_head][hd_v]
  // k and v first: the q row blocks of the last kv heads are then the last items of step 1, and
  // the first heads' step 2 and 3 run while they finish.
  const LinearOut qkv_outs[3] = {{w.wk, k, w.bk}, {w.wv, v, w.bv}, {w.wq, q, w.bq}};
  constexpr int kOutK = 0, kOutV = 1, kOutQ = 2;
  const LinearPlan qkv(arena, qkv_outs, 3, x, n);
  qkv.convert(0, n);
  const LinearOut o_out{w.wo, out, w.bo};
  const LinearPlan proj(arena, &o_out, 1, o, n, 2 * int64_t{pool.size()});  // the region ends on these

  // Query blocks never cross a segment: block b covers rows [qb_t0[b], qb_t1[b]) of segment qb_seg[b].
  const int64_t qb = attn_query_block(shape);
  int64_t n_qb = 0;
  for (const AttnSegment& sg : segs) n_qb += (sg.n + qb - 1) / qb;
  int64_t* qb_t0 = arena.alloc<int64_t>(static_cast<size_t>(n_qb));
  int64_t* qb_t1 = arena.alloc<int64_t>(static_cast<size_t>(n_qb));
  int* qb_seg = arena.alloc<int>(static_cast<size_t>(n_qb));
  for (int s = 0, b = 0; s < n_seg; ++s)
    for (int64_t t = segs[s].t0; t < segs[s].t0 + segs[s].n; t += qb, ++b) {
      qb_t0[b] = t;
      qb_t1[b] = std::min(segs[s].t0 + segs[s].n, t + qb);
      qb_seg[b] = s;
    }
  const bool fused = n_qb == 1;
  const int64_t per_head = fused ? 1 : 1 + n_qb;  // step 2, then step 3's items
  const int64_t e1 = qkv.items(), e2 = e1 + n_kv * per_head;
  const int64_t n_items = e2 + proj.items();
  // Done counters: [e1] q/k/v blocks (0/1), [n_kv] heads roped and cached, [n_qb] heads attended
  // per query block, [1] query blocks converted.
  const int64_t n_done = e1 + n_kv + n_qb + 1;
  auto* done = arena.alloc<std::atomic<int32_t>>(static_cast<size_t>(n_done));
  for (int64_t i = 0; i < n_done; ++i) new (&done[i]) std::atomic<int32_t>(0);
  std::atomic<int32_t>* roped = done + e1;
  std::atomic<int32_t>* attended = roped + n_kv;
  std::atomic<int32_t>& converted = attended[n_qb];
  // One cos/sin table per token, shared by every kv head's step 2.
  const int n_rot = c.rope.n_rot, rope_w = std::max(n_rot, 1);
  float* rope_tab = arena.alloc<float>(static_cast<size_t>(n) * rope_w);
  int64_t max_keys = 0;
  for (const AttnSegment& sg : segs) {
    for (int64_t i = 0; i < sg.n; ++i) rope_cache(c.rope, sg.pos0 + i, 1.0f, rope_tab + (sg.t0 + i) * rope_w);
    const int64_t end = sg.pos0 + sg.n;
    max_keys = std::max(max_keys, c.window > 0 ? std::min<int64_t>(c.window, end) : end);
  }

  auto wait_rows = [&](int i, int64_t r0, int64_t r1) {
    for (int64_t it = qkv.item_of(i, r0); it <= qkv.item_of(i, r1 - 1); ++it) wait_count(done[it], 1);
  };
  // Step 2 for kv head hk: per token its q heads, its k head, the cache.
  auto rope_head = [&](int hk) {
    for (int s = 0; s < n_seg; ++s)
      for (int64_t i = 0; i < segs[s].n; ++i) {
        const int64_t t = segs[s].t0 + i, pos = segs[s].pos0 + i;
        const float* cache = rope_tab + t * rope_w;
        const KvRows &kc = *segs[s].k, &vc = *segs[s].v;
        for (int h = hk * group; h < (hk + 1) * group; ++h) {
          float* qh = q + t * q_w + int64_t{h} * hdk;
          if (w.q_norm) rms_norm(qh, w.q_norm, qh, hdk, c.eps);
          rope_apply(c.rope_style, n_rot, cache, qh);
          if (kc.hadamard) hadamard_rotate(qh, hdk);  // q·k of rotated rows
        }
        float* kh = k + t * k_w + int64_t{hk} * hdk;
        if (w.k_norm) rms_norm(kh, w.k_norm, kh, hdk, c.eps);
        rope_apply(c.rope_style, n_rot, cache, kh);
        if (kc.hadamard) hadamard_rotate(kh, hdk);
        kv_store(kc, pos, int64_t{hk} * hdk, kh, hdk);
        float* vh = v + t * v_w + int64_t{hk} * hdv;
        if (vc.hadamard) hadamard_rotate(vh, hdv);
        kv_store(vc, pos, int64_t{hk} * hdv, vh, hdv);
      }
  };

  const int64_t work = qkv.work() + proj.work() + n * c.n_head * max_keys * (hdk + hdv);
  const bool par = pool.size() > 1 && work >= kMinParallelWork;
  parallel_items(pool, n_items, par, [&](int64_t item, int) {
    if (item < e1) {
      qkv.run(item);
      count_done(done[item]);
    } else if (item < e2) {
      const int hk = static_cast<int>((item - e1) / per_head);
      const int64_t j = (item - e1) % per_head;
      if (j == 0) {
        wait_rows(kOutQ, int64_t{hk} * group * hdk, int64_t{hk + 1} * group * hdk);
        wait_rows(kOutK, int64_t{hk} * hdk, int64_t{hk + 1} * hdk);
        wait_rows(kOutV, int64_t{hk} * hdv, int64_t{hk + 1} * hdv);
        rope_head(hk);
        if (!fused) {
          count_done(roped[hk]);
          return;
        }
      } else {
        wait_count(roped[hk], 1);
      }
      const int64_t b = fused ? 0 : j - 1;
      const AttnSegment& sg = segs[qb_seg[b]];
      AttnKeys keys[kAttnQueryBlock];  // row t of the block sits at position sg.pos0 + (t − sg.t0)
      for (int64_t t = qb_t0[b]; t < qb_t1[b]; ++t)
        keys[t - qb_t0[b]] = causal_keys(*sg.k, *sg.v, sg.pos0 + (t - sg.t0), c.window);
      attend_rows(shape, q, qb_t0[b], qb_t1[b], hk * group, (hk + 1) * group, keys, o);
      if (sg.v->hadamard)  // Σ p·(H v) = H Σ p·v: rotate back
        for (int64_t t = qb_t0[b]; t < qb_t1[b]; ++t)
          for (int h = hk * group; h < (hk + 1) * group; ++h)
            hadamard_rotate(o + t * o_w + int64_t{h} * hdv, hdv);
      // acq_rel: the last head's item sees every other head's o rows before converting them.
      if (attended[b].fetch_add(1, std::memory_order_acq_rel) + 1 == n_kv) {
        proj.convert(qb_t0[b], qb_t1[b]);
        count_done(converted);
      }
    } else {
      wait_count(converted, static_cast<int32_t>(n_qb));
      proj.run(item - e2);
    }
  });
}

}  // namespace strata
