// DeepSeek-V4.1 attention sub-layer over a batch (v41_step.h): sliding window + CSA2 compressed
// KV (compressor, two-level indexer, shared Full / Reindex / Reuse sources). Rounding follows the
// reference (v41_quant.h): bf16 Linears and norms, f32 ratio-2 compressor and softmax.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/deepseek_v41/v41_blocks.h"
#include "model/deepseek_v41/v41_quant.h"
#include "model/deepseek_v41/v41_select.h"
#include "model/deepseek_v41/v41_step.h"

namespace strata::v41 {

namespace {

using Vec = std::vector<float>;

Vec rows_of(int64_t n, int64_t w) {
  return Vec(static_cast<size_t>(n * w));
}

// The per-row projections of layer l (every row of the batch, no cache read).
struct Proj {
  Vec qr;      // [n][q_lora]  RMSNorm(wq_a x)
  Vec q;       // [n][H*hd]    wq_b qr, RoPE'd
  Vec kv;      // [n][hd]      window K=V row: RMSNorm(wkv x), RoPE'd, FP8-rounded
  Vec ca, cg;  // KV sources [n][hd]: ratio 1 the latent RMSNorm(c_wkv x); ratio 2 c_wkv x and c_wgate x (f32)
  Vec iq, iw;  // index sources: [n][IH*ID] indexer queries (RoPE'd, FP4) and [n][IH] head weights
};

Proj project(Step& s, int l, const float* x) {
  const Config& c = s.m.cfg;
  const LayerW& L = s.m.w.layers[l];
  const LayerCfg& lc = c.layers[l];
  const Rope& rope = lc.ratio ? s.m.rope_comp : s.m.rope_plain;
  const int64_t n = s.n(), D = c.dim, H = c.n_heads, hd = c.head_dim, Q = c.q_lora;
  ThreadPool& pool = s.pool;
  Proj p;
  Vec t = rows_of(n, Q);
  linear_bf16_rows(pool, L.wq_a.w.data(), Q, D, x, D, n, t.data(), Q);
  p.qr = rows_of(n, Q);
  for (int64_t r = 0; r < n; ++r)
    rms_norm_bf16(t.data() + r * Q, L.q_norm.data(), Q, c.eps, p.qr.data() + r * Q);
  p.q = rows_of(n, H * hd);
  linear_bf16_rows(pool, L.wq_b.w.data(), H * hd, Q, p.qr.data(), Q, n, p.q.data(), H * hd);
  t = rows_of(n, hd);
  linear_bf16_rows(pool, L.wkv.w.data(), hd, D, x, D, n, t.data(), hd);
  p.kv = rows_of(n, hd);
  for (int64_t r = 0; r < n; ++r) {
    rope.apply(p.q.data() + r * H * hd, H, hd, s.pos[r], false);
    float* kv = p.kv.data() + r * hd;
    rms_norm_bf16(t.data() + r * hd, L.kv_norm.data(), hd, c.eps, kv);
    rope.apply(kv, 1, hd, s.pos[r], false);
    fake_quant_fp8(kv, hd, 32);
  }
  if (lc.kv_source) {
    p.ca = rows_of(n, hd);
    if (lc.ratio == 1) {
      linear_bf16_rows(pool, L.c_wkv.w.data(), hd, D, x, D, n, t.data(), hd);
      for (int64_t r = 0; r < n; ++r)
        rms_norm_bf16(t.data() + r * hd, L.c_norm.data(), hd, c.eps, p.ca.data() + r * hd);
    } else {
      p.cg = rows_of(n, hd);
      linear_f32_rows(pool, L.c_wkv.w.data(), hd, D, x, D, n, s.s_ref.data(), p.ca.data(), hd);
      linear_f32_rows(pool, L.c_wgate.w.data(), hd, D, x, D, n, s.s_ref.data(), p.cg.data(), hd);
    }
  }
  if (lc.index_source) {
    const int64_t IH = c.idx_heads, ID = c.idx_dim;
    p.iq = rows_of(n, IH * ID);
    linear_bf16_rows(pool, L.i_wq_b.w.data(), IH * ID, Q, p.qr.data(), Q, n, p.iq.data(), IH * ID);
    p.iw = rows_of(n, IH);
    linear_bf16_rows(pool, L.i_wproj.w.data(), IH, D, x, D, n, p.iw.data(), IH);
    const float wscale = static_cast<float>(std::pow(ID, -0.5) * std::pow(IH, -0.5));
    for (int64_t r = 0; r < n; ++r) {
      float* q = p.iq.data() + r * IH * ID;
      s.m.rope_comp.apply(q, IH, ID, s.pos[r], false);
      fake_quant_fp4(q, IH * ID, 32);
      for (int64_t h = 0; h < IH; ++h) p.iw[r * IH + h] = bf16r(p.iw[r * IH + h] * wscale);
    }
  }
  return p;
}

// A compressed entry j of KV source l from its latent: index key (owners) and KV row.
void emit_compressed(const V41Model& m, V41State& st, int l, int64_t j, float* latent) {
  const Config& c = m.cfg;
  const LayerW& L = m.w.layers[l];
  V41LayerState& s = st.layers[l];
  const int r = c.layers[l].ratio;
  if (c.layers[l].owns_index_k) {
    float* k = s.ik->row(j);
    Vec t(static_cast<size_t>(c.idx_dim));
    linear_bf16(L.i_wk.w.data(), latent, c.idx_dim, c.head_dim, t.data());
    rms_norm_bf16(t.data(), L.i_knorm.data(), c.idx_dim, c.eps, k);
    m.rope_comp.apply(k, 1, c.idx_dim, j * r, false);
    fake_quant_fp4(k, c.idx_dim, 32);
  }
  float* kv = s.ckv->row(j);
  std::memcpy(kv, latent, sizeof(float) * c.head_dim);
  m.rope_comp.apply(kv, 1, c.head_dim, j * r, false);
  fake_quant_fp4_e4m3(kv, c.head_dim, 16);
  s.n_comp = j + 1;
}

// Compressor of KV source l fed with the token at `pos` (a / g: its projections, Proj::ca / cg):
// ratio 1 emits every token, ratio 2 pools each pair with a per-channel softmax over the two gate
// scores (f32).
void compress(const V41Model& m, V41State& st, int l, float* a, const float* g, int64_t pos) {
  const Config& c = m.cfg;
  const int hd = c.head_dim;
  if (c.layers[l].ratio == 1) {
    emit_compressed(m, st, l, pos, a);
    return;
  }
  float* pend = st.layers[l].pend->row(0);
  if (pos % 2 == 0) {
    std::memcpy(pend, a, sizeof(float) * hd);
    std::memcpy(pend + hd, g, sizeof(float) * hd);
    return;
  }
  Vec pooled(static_cast<size_t>(hd)), latent(static_cast<size_t>(hd));
  pool_ratio2(pend, pend + hd, a, g, hd, pooled.data());
  rms_norm_bf16(pooled.data(), m.w.layers[l].c_norm.data(), hd, c.eps, latent.data());
  emit_compressed(m, st, l, pos / 2, latent.data());
}

// Index source l scores the index keys of its KV source for the query at `pos` (batch row `row`;
// iq / iw: its indexer query and head weights) and publishes the selection (and, on the candidate
// layer, the candidate mask) for that row.
void index_select(const V41Model& m, const V41State& st, V41Scratch& sc, int l, const float* iq,
                  const float* iw, int64_t pos, int64_t row) {
  const Config& c = m.cfg;
  const LayerCfg& lc = c.layers[l];
  const V41LayerState& src = st.layers[lc.kv_src];
  const int IH = c.idx_heads, ID = c.idx_dim;
  const int64_t lens = (pos + 1) / lc.ratio;
  std::vector<int32_t>& out = sc.sel[l][row];
  std::vector<uint8_t>& cand = sc.cand[row];
  if (lens == 0) {
    out.clear();
    if (l == c.cand_layer) cand.clear();
    return;
  }
  Vec sco(static_cast<size_t>(lens));
  for (int64_t j = 0; j < lens; ++j) {
    const float* k = src.ik->row(j);
    float acc = 0.0f;
    for (int h = 0; h < IH; ++h) {
      double dot = 0.0;
      for (int d = 0; d < ID; ++d) dot += static_cast<double>(iq[h * ID + d]) * k[d];
      const float qk = std::max(bf16r(static_cast<float>(dot)), 0.0f);
      acc += bf16r(qk * iw[h]);
    }
    sco[j] = bf16r(acc);
  }
  const uint8_t* mask = nullptr;
  if (l == c.cand_layer) {
    candidate_mask(sco.data(), lens, c.cand_block, c.cand_topk_blocks, &cand);
  } else if (c.cand_layer >= 0 && l > c.cand_layer) {
    STRATA_ASSERT(static_cast<int64_t>(cand.size()) == lens);
    mask = cand.data();
  }
  select_topk(sco.data(), mask, lens, c.idx_topk, &out);
}

}  // namespace

void attention_layer(Step& s, int l, const float* x, float* y) {
  const Config& c = s.m.cfg;
  const LayerW& L = s.m.w.layers[l];
  const LayerCfg& lc = c.layers[l];
  const Rope& rope = lc.ratio ? s.m.rope_comp : s.m.rope_plain;
  const int64_t n = s.n(), H = c.n_heads, hd = c.head_dim, W = c.window;
  Proj p = project(s, l, x);
  Vec o = rows_of(n, H * hd);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<const float*> keys;
  // Each sequence's tokens in order: a token's window row, compressed entry and index keys are
  // written before it reads them, and it reads nothing a later token writes.
  for (const SeqRun& run : s.b.runs) {
    V41State& st = s.state(run);
    V41LayerState& ls = st.layers[l];
    for (int64_t r = run.t0; r < run.t0 + run.n; ++r) {
      const int64_t pos = s.pos[r];
      std::memcpy(ls.win->row(pos), p.kv.data() + r * hd, sizeof(float) * hd);
      keys.clear();
      for (int64_t q = std::max<int64_t>(0, pos - W + 1); q <= pos; ++q) keys.push_back(ls.win->row(q));
      if (lc.ratio) {
        if (lc.kv_source)
          compress(s.m, st, l, p.ca.data() + r * hd, lc.ratio > 1 ? p.cg.data() + r * hd : nullptr, pos);
        if (lc.index_source) {
          const int64_t iqw = int64_t{c.idx_heads} * c.idx_dim;
          index_select(s.m, st, s.sc, l, p.iq.data() + r * iqw, p.iw.data() + r * c.idx_heads, pos, r);
        }
        const V41LayerState& src = st.layers[lc.kv_src];
        for (int32_t j : s.sc.sel[lc.idx_src][r]) keys.push_back(src.ckv->row(j));
      }
      const bool small = f32_gemm_small(static_cast<int64_t>(keys.size()), hd, H);
      float* orow = o.data() + r * H * hd;
      for (int64_t h = 0; h < H; ++h)
        attend_head(p.q.data() + r * H * hd + h * hd, keys.data(), keys.size(), static_cast<int>(hd), scale,
                    L.attn_sink[h], small, orow + h * hd);
    }
  }
  for (int64_t r = 0; r < n; ++r) rope.apply(o.data() + r * H * hd, H, hd, s.pos[r], true);
  // grouped low-rank output: z_g = wo_a[g] . o_g, y = wo_b . concat(z)
  const int64_t G = c.o_groups, R = c.o_lora, gw = H * hd / G;
  Vec z = rows_of(n, G * R);
  for (int64_t g = 0; g < G; ++g)
    linear_bf16_rows(s.pool, L.wo_a.row(g * R), R, gw, o.data() + g * gw, H * hd, n, z.data() + g * R, G * R);
  linear_bf16_rows(s.pool, L.wo_b.w.data(), c.dim, G * R, z.data(), G * R, n, y, c.dim);
}

}  // namespace strata::v41
