// DeepSeek-V4.1 attention sub-layer over a batch (v41_step.h): sliding window + CSA2 compressed
// KV (compressor, two-level indexer, shared Full / Reindex / Reuse sources). Rounding follows the
// reference (v41_quant.h): bf16 Linears and norms, f32 ratio-2 compressor and softmax.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/attention_core.h"
#include "kernels/ops.h"
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

// Row i of a cache as f32: the row itself (f32 caches), else decoded into buf (quant/'s to_float:
// exactly the values the forward rounded the row to before storing it, v41_forward.h).
const float* row_f32(const RowCache& rc, int64_t i, float* buf) {
  if (rc.type() == GgmlType::f32) return rc.row(i);
  kv_to_f32(rc.view(), i, buf);
  return buf;
}

// The per-row projections of layer l (every row of the batch, no cache read).
struct Proj {
  Vec qr;      // [n][q_lora]  RMSNorm(wq_a x)
  Vec q;       // [n][H*hd]    wq_b qr, RoPE'd
  Vec kv;      // [n][hd]      window K=V row: RMSNorm(wkv x), RoPE'd (FP8-rounded as it is stored)
  Vec ca, cg;  // KV sources [n][hd]: ratio 1 the latent RMSNorm(c_wkv x); ratio 2 c_wkv x and c_wgate x (f32)
  Vec iq, iw;  // index sources: [n][IH*ID] indexer queries (RoPE'd, FP4) and [n][IH] head weights
};

Proj project(Step& s, int l, const float* x) {
  const Config& c = s.m.cfg;
  const LayerW& L = s.m.w.layers[l];
  const LayerCfg& lc = c.layers[l];
  const bool comp = lc.ratio != 0;
  const int64_t n = s.n(), H = c.n_heads, hd = c.head_dim, Q = c.q_lora;
  Proj p;
  Vec t = rows_of(n, Q);
  lin(s, L.wq_a, x, n, t.data());
  p.qr = rows_of(n, Q);
  for (int64_t r = 0; r < n; ++r)
    norm_bf16(s, t.data() + r * Q, L.q_norm.data(), Q, c.eps, p.qr.data() + r * Q);
  p.q = rows_of(n, H * hd);
  lin(s, L.wq_b, p.qr.data(), n, p.q.data());
  t = rows_of(n, hd);
  lin(s, L.wkv, x, n, t.data());
  p.kv = rows_of(n, hd);
  for (int64_t r = 0; r < n; ++r) {
    rope_bf16(s, comp, p.q.data() + r * H * hd, H, hd, s.pos[r], false);
    float* kv = p.kv.data() + r * hd;
    norm_bf16(s, t.data() + r * hd, L.kv_norm.data(), hd, c.eps, kv);
    rope_bf16(s, comp, kv, 1, hd, s.pos[r], false);
  }
  if (lc.kv_source) {
    p.ca = rows_of(n, hd);
    if (lc.ratio == 1) {
      lin(s, L.c_wkv, x, n, t.data());
      for (int64_t r = 0; r < n; ++r)
        norm_bf16(s, t.data() + r * hd, L.c_norm.data(), hd, c.eps, p.ca.data() + r * hd);
    } else {
      p.cg = rows_of(n, hd);
      lin(s, L.c_wkv, x, n, p.ca.data(), s.s_ref.data());
      lin(s, L.c_wgate, x, n, p.cg.data(), s.s_ref.data());
    }
  }
  if (lc.index_source) {
    const int64_t IH = c.idx_heads, ID = c.idx_dim;
    p.iq = rows_of(n, IH * ID);
    lin(s, L.i_wq_b, p.qr.data(), n, p.iq.data());
    p.iw = rows_of(n, IH);
    lin(s, L.i_wproj, x, n, p.iw.data());
    const float wscale = static_cast<float>(std::pow(ID, -0.5) * std::pow(IH, -0.5));
    for (int64_t r = 0; r < n; ++r) {
      float* q = p.iq.data() + r * IH * ID;
      rope_bf16(s, true, q, IH, ID, s.pos[r], false);
      fake_quant_fp4(q, IH * ID, 32);
      for (int64_t h = 0; h < IH; ++h) p.iw[r * IH + h] = bf16r(p.iw[r * IH + h] * wscale);
    }
  }
  return p;
}

// A compressed entry j of KV source l from its latent: index key (owners) and KV row.
void emit_compressed(Step& sp, V41State& st, int l, int64_t j, float* latent) {
  const V41Model& m = sp.m;
  const Config& c = m.cfg;
  const LayerW& L = m.w.layers[l];
  V41LayerState& s = st.layers[l];
  const int r = c.layers[l].ratio;
  // Each row rounded to its FP4 grid, then stored in the part's type (v41_forward.h: lossless).
  if (c.layers[l].owns_index_k) {
    Vec t(static_cast<size_t>(c.idx_dim)), k(static_cast<size_t>(c.idx_dim));
    lin(sp, L.i_wk, latent, 1, t.data());
    norm_bf16(sp, t.data(), L.i_knorm.data(), c.idx_dim, c.eps, k.data());
    rope_bf16(sp, true, k.data(), 1, c.idx_dim, j * r, false);
    fake_quant_fp4(k.data(), c.idx_dim, 32);
    kv_store(s.ik->view(), j, 0, k.data(), c.idx_dim);
  }
  Vec kv(latent, latent + c.head_dim);
  rope_bf16(sp, true, kv.data(), 1, c.head_dim, j * r, false);
  fake_quant_fp4_e4m3(kv.data(), c.head_dim, 16);
  kv_store(s.ckv->view(), j, 0, kv.data(), c.head_dim);
  s.n_comp = j + 1;
}

// Compressor of KV source l fed with the token at `pos` (a / g: its projections, Proj::ca / cg):
// ratio 1 emits every token, ratio 2 pools each pair with a per-channel softmax over the two gate
// scores (f32).
void compress(Step& sp, V41State& st, int l, float* a, const float* g, int64_t pos) {
  const Config& c = sp.m.cfg;
  const int hd = c.head_dim;
  if (c.layers[l].ratio == 1) {
    emit_compressed(sp, st, l, pos, a);
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
  norm_bf16(sp, pooled.data(), sp.m.w.layers[l].c_norm.data(), hd, c.eps, latent.data());
  emit_compressed(sp, st, l, pos / 2, latent.data());
}

// Index source l scores the index keys of its KV source for the query at `pos` (batch row `row`;
// iq / iw: its indexer query and head weights) and publishes the selection (and, on the candidate
// layer, the candidate mask) for that row. topk: the row's sequence's own (SeqKnobs::index_topk of
// the model's; the candidate blocks stay the model's).
void index_select(const Step& sp, const V41State& st, V41Scratch& sc, int l, const float* iq, const float* iw,
                  int64_t pos, int64_t row, int topk) {
  const Config& c = sp.m.cfg;
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
  if (sp.fast()) {  // the same sums per key, the q.k products by the ops table's f32 dot
    // typed keys (MXFP4) decoded once per query, in chunks of kChunk rows, for all heads
    constexpr int64_t kChunk = 256;
    const bool f32 = src.ik->type() == GgmlType::f32;
    std::vector<const float*> keys(static_cast<size_t>(std::min(lens, kChunk)));
    Vec dec(f32 ? 0 : static_cast<size_t>(std::min(lens, kChunk) * ID)), dots(keys.size());
    std::fill(sco.begin(), sco.end(), 0.0f);
    for (int64_t j0 = 0; j0 < lens; j0 += kChunk) {
      const int64_t nj = std::min(kChunk, lens - j0);
      for (int64_t j = 0; j < nj; ++j) keys[j] = row_f32(*src.ik, j0 + j, dec.data() + j * ID);
      for (int h = 0; h < IH; ++h) {
        ops_table().dot_f32_rows(iq + h * ID, keys.data(), nj, ID, dots.data());
        for (int64_t j = 0; j < nj; ++j) sco[j0 + j] += bf16r(std::max(bf16r(dots[j]), 0.0f) * iw[h]);
      }
    }
    for (float& v : sco) v = bf16r(v);
  } else {
    Vec kbuf(static_cast<size_t>(ID));
    for (int64_t j = 0; j < lens; ++j) {
      const float* k = row_f32(*src.ik, j, kbuf.data());
      float acc = 0.0f;
      for (int h = 0; h < IH; ++h) {
        double dot = 0.0;
        for (int d = 0; d < ID; ++d) dot += static_cast<double>(iq[h * ID + d]) * k[d];
        const float qk = std::max(bf16r(static_cast<float>(dot)), 0.0f);
        acc += bf16r(qk * iw[h]);
      }
      sco[j] = bf16r(acc);
    }
  }
  const uint8_t* mask = nullptr;
  if (l == c.cand_layer) {
    candidate_mask(sco.data(), lens, c.cand_block, c.cand_topk_blocks, &cand);
  } else if (c.cand_layer >= 0 && l > c.cand_layer) {
    STRATA_ASSERT(static_cast<int64_t>(cand.size()) == lens);
    mask = cand.data();
  }
  select_topk(sco.data(), mask, lens, topk, &out);
}

}  // namespace

void attention_layer(Step& s, int l, const float* x, float* y) {
  const Config& c = s.m.cfg;
  const LayerW& L = s.m.w.layers[l];
  const LayerCfg& lc = c.layers[l];
  const int64_t n = s.n(), H = c.n_heads, hd = c.head_dim, W = c.window;
  Proj p = project(s, l, x);
  Vec o = rows_of(n, H * hd);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<const float*> keys;
  Vec wbuf, cbuf;            // typed rows decoded for a token (oracle: window and selected; fast: selected)
  std::vector<int32_t> seq;  // 0, 1, ...: the decoded selected rows in selection order
  Vec wring;                 // fast, typed window: an f32 mirror of the ring during a run
  // Fast: the attention core over the window ring's rows and the selected compressed rows.
  const AttnShape shape{.n_head = static_cast<int>(H),
                        .n_head_kv = 1,
                        .head_dim_k = static_cast<int>(hd),
                        .head_dim_v = static_cast<int>(hd),
                        .scale = scale,
                        .sinks = L.attn_sink.data()};
  // Each sequence's tokens in order: a token's window row, compressed entry and index keys are
  // written before it reads them, and it reads nothing a later token writes.
  for (const SeqRun& run : s.b.runs) {
    V41State& st = s.state(run);
    V41LayerState& ls = st.layers[l];
    // Fast numerics over a typed (FP8) window: the ring's rows decoded into an f32 mirror of the same
    // capacity and addressing (the window before the run, then each token's row once stored), so
    // each row is converted once per run, not once per query head, and the attention core meets the
    // same absolute rows in the same key blocks as over an f32 ring.
    KvRows win = ls.win->view();
    if (s.fast() && win.type != GgmlType::f32) {
      wring.resize(static_cast<size_t>(ls.win->capacity() * hd));
      win = KvRows::f32(wring.data(), hd, ls.win->capacity(), ls.win->ring());
      for (int64_t q = std::max<int64_t>(0, run.pos0 - W + 1); q < run.pos0; ++q)
        kv_to_f32(ls.win->view(), q, win.row(q));
    }
    for (int64_t r = run.t0; r < run.t0 + run.n; ++r) {
      const int64_t pos = s.pos[r];
      // The window row FP8-rounded as the reference does: an f32 ring holds fake_quant_fp8's values;
      // an fp8_e4m3 ring the encoder's bytes of the unrounded row (quant/'s FP8 codec picks the
      // reference's UE8M0 scale and E4M3 rounding: the reference's own bytes, decoding to those values).
      float* kvr = p.kv.data() + r * hd;
      if (ls.win->type() == GgmlType::f32) fake_quant_fp8(kvr, hd, 32);
      kv_store(ls.win->view(), pos, 0, kvr, hd);
      if (win.data != ls.win->view().data) kv_to_f32(ls.win->view(), pos, win.row(pos));
      const V41LayerState* src = nullptr;
      if (lc.ratio) {
        if (lc.kv_source)
          compress(s, st, l, p.ca.data() + r * hd, lc.ratio > 1 ? p.cg.data() + r * hd : nullptr, pos);
        if (lc.index_source) {
          const int64_t iqw = int64_t{c.idx_heads} * c.idx_dim;
          index_select(s, st, s.sc, l, p.iq.data() + r * iqw, p.iw.data() + r * c.idx_heads, pos, r,
                       static_cast<int>(run.knobs.index_topk(c.idx_topk)));
        }
        src = &st.layers[lc.kv_src];
      }
      const std::vector<int32_t>* sel = src ? &s.sc.sel[lc.idx_src][r] : nullptr;
      const int64_t nsel = sel ? static_cast<int64_t>(sel->size()) : 0;
      float* orow = o.data() + r * H * hd;
      if (s.fast()) {
        // typed compressed rows (NVFP4) decoded in selection order: a list's key blocks follow its
        // positions, so the online softmax takes the f32 cache's steps
        AttnKeys k;
        k.n_ranges = 1;
        k.ranges[0] = {&win, &win, std::max<int64_t>(0, pos - W + 1), pos + 1};
        KvRows dec;
        if (sel && src->ckv->type() != GgmlType::f32) {
          cbuf.resize(static_cast<size_t>(nsel * hd));
          seq.resize(static_cast<size_t>(nsel));
          for (int64_t i = 0; i < nsel; ++i) {
            kv_to_f32(src->ckv->view(), (*sel)[i], cbuf.data() + i * hd);
            seq[i] = static_cast<int32_t>(i);
          }
          dec = KvRows::f32(cbuf.data(), hd, std::max<int64_t>(nsel, 1), false);
          k.list = {&dec, &dec, seq.data(), nsel};
        } else if (sel) {
          k.list = {&src->ckv->view(), &src->ckv->view(), sel->data(), nsel};
        }
        attend_rows(shape, p.q.data() + r * H * hd, 0, 1, 0, static_cast<int>(H), &k, orow);
        for (int64_t i = 0; i < H * hd; ++i) orow[i] = bf16r(orow[i]);
        continue;
      }
      keys.clear();
      const int64_t q0 = std::max<int64_t>(0, pos - W + 1);
      wbuf.resize(static_cast<size_t>((pos + 1 - q0) * hd));
      for (int64_t q = q0; q <= pos; ++q) keys.push_back(row_f32(*ls.win, q, wbuf.data() + (q - q0) * hd));
      cbuf.resize(static_cast<size_t>(nsel * hd));
      for (int64_t i = 0; i < nsel; ++i) keys.push_back(row_f32(*src->ckv, (*sel)[i], cbuf.data() + i * hd));
      const bool small = f32_gemm_small(static_cast<int64_t>(keys.size()), hd, H);
      for (int64_t h = 0; h < H; ++h)
        attend_head(p.q.data() + r * H * hd + h * hd, keys.data(), keys.size(), static_cast<int>(hd), scale,
                    L.attn_sink[h], small, orow + h * hd);
    }
  }
  for (int64_t r = 0; r < n; ++r) rope_bf16(s, lc.ratio != 0, o.data() + r * H * hd, H, hd, s.pos[r], true);
  // grouped low-rank output: z_g = wo_a[g] . o_g, y = wo_b . concat(z)
  const int64_t G = c.o_groups, R = c.o_lora, gw = H * hd / G;
  Vec z = rows_of(n, G * R);
  if (s.fast()) {
    Vec og = rows_of(n, gw), zg = rows_of(n, R);
    for (int64_t g = 0; g < G; ++g) {
      for (int64_t r = 0; r < n; ++r)
        std::memcpy(og.data() + r * gw, o.data() + r * H * hd + g * gw, sizeof(float) * gw);
      TensorView wg = L.wo_a.tv;  // rows g*R .. (g+1)*R
      wg.ne[1] = R;
      tensor_view_set_contiguous(&wg);
      wg.data = L.wo_a.tv.row(g * R);
      lin_fast(s, wg, og.data(), n, zg.data(), true);
      for (int64_t r = 0; r < n; ++r)
        std::memcpy(z.data() + r * G * R + g * R, zg.data() + r * R, sizeof(float) * R);
    }
  } else {
    for (int64_t g = 0; g < G; ++g)
      linear_bf16_rows(s.pool, L.wo_a.row(g * R), R, gw, o.data() + g * gw, H * hd, n, z.data() + g * R,
                       G * R);
  }
  lin(s, L.wo_b, z.data(), n, y);
}

}  // namespace strata::v41
