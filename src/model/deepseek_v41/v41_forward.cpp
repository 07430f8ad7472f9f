// DeepSeek-V4.1 forward (see v41_forward.h). Rounding follows the PyTorch reference: every bf16
// Linear / norm / rope output is rounded to bf16 (v41_quant.h); mHC mixes, Sinkhorn, the
// router, the compressor's ratio-2 pooling and the attention softmax run in f32.
#include "model/deepseek_v41/v41_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "model/deepseek4/ds4_mhc.h"
#include "model/deepseek_v41/v41_blocks.h"
#include "model/deepseek_v41/v41_engram.h"
#include "model/deepseek_v41/v41_quant.h"
#include "model/deepseek_v41/v41_select.h"

namespace strata::v41 {

KvSpec v41_kv_spec(const Config& c) {
  KvSpec s;
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerCfg& lc = c.layers[l];
    KvLayerSpec ls;
    KvPartSpec w = kv_part_window("window", "sliding-window ring (K=V, every layer)", c.head_dim, c.window);
    w.step_in_ring = false;  // the reference path writes and reads one token at a time
    w.has_native = true;
    w.native = KvType::fp8_e4m3;
    ls.parts.push_back(w);
    if (lc.kv_source) {
      const int r = lc.ratio;
      const std::string rs = std::to_string(r);
      KvPartSpec ckv = kv_part_every(KvPartKind::compressed, "compressed_r" + rs,
                                     "ratio-" + rs + " compressed KV (KV sources; 1 row / " +
                                         (r == 1 ? std::string("token") : rs + " tokens") + ")",
                                     c.head_dim, r);
      ckv.has_native = true;
      ckv.native = KvType::nvfp4;
      ls.parts.push_back(ckv);
      if (lc.owns_index_k) {
        KvPartSpec ik = kv_part_every(KvPartKind::indexer, "index_keys_r" + rs,
                                      "ratio-" + rs + " index keys (KV + index sources)", c.idx_dim, r);
        ik.has_native = true;
        ik.native = KvType::mxfp4;
        ls.parts.push_back(ik);
      }
      if (r > 1) {
        KvPartSpec st = kv_part_state("compressor_state_r2", "ratio-2 compressor pending token (kv + score)",
                                      2 * int64_t{c.head_dim}, 1);
        st.has_native = true;
        ls.parts.push_back(st);
      }
    }
    s.layers.push_back(std::move(ls));
  }
  return s;
}

V41State::V41State(const V41Model& m, int n_ctx_, int n_batch_)
    : kv(v41_kv_spec(m.cfg), n_ctx_, n_batch_), n_ctx(n_ctx_), n_batch(n_batch_) {
  const Config& c = m.cfg;
  layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    KvLayer& kl = kv.layer(l);
    V41LayerState& s = layers[l];
    s.win = &kl.part(kl.find(KvPartKind::window));
    if (const int i = kl.find(KvPartKind::compressed); i >= 0) s.ckv = &kl.part(i);
    if (const int i = kl.find(KvPartKind::indexer); i >= 0) s.ik = &kl.part(i);
    if (const int i = kl.find(KvPartKind::state); i >= 0) s.pend = &kl.part(i);
  }
  history.reserve(static_cast<size_t>(n_ctx));
  H.assign(static_cast<size_t>(n_batch) * c.hc * c.dim, 0.0f);
  pre.assign(static_cast<size_t>(n_batch) * c.hc, 0.0f);
  sel.resize(static_cast<size_t>(c.n_layers));
  cand.resize(static_cast<size_t>(n_batch));
}

void V41State::reset() {
  history.clear();
  for (auto& s : layers) s.n_comp = 0;
}

namespace {

struct Ctx {
  const V41Model& m;
  const Config& c;
  V41State& st;
};

// mixes = (fn . flat) * rsqrt(mean(flat^2) + eps), then pre/post/comb (v41 Sinkhorn).
// s_ref: the f32 Linears sum in the order of the BLAS kernel the reference ran for a forward of
// s_ref tokens (v41_quant.h linear_f32). Each position uses pos + 1, the per-prefix forward whose
// last row it is (prefill.f32 row i = a fresh forward over i + 1 tokens), so prefill and decode
// compute the same function; the head runs on one row (the reference's logits of the last token).
void hc_site(const Config& c, const HcSite& s, const float* H, int64_t s_ref, ds4::HcCoeffs* co) {
  const int64_t n = int64_t{c.hc} * c.dim;
  const float r = 1.0f / std::sqrt(torch_mean_sq_f32(H, n) + c.eps);
  float mixes[64];
  const int nmix = (2 + c.hc) * c.hc;
  linear_f32(s.fn.w.data(), H, nmix, n, s_ref, mixes);
  for (int k = 0; k < nmix; ++k) mixes[k] *= r;
  hc_site_coeffs(mixes, s.scale.data(), s.base.data(), c.hc, c.sinkhorn_iters, c.hc_eps, co);
}

Status engram(const Ctx& x, int l, int64_t pos, float* H) {
  const Config& c = x.c;
  const LayerW& L = x.m.w.layers[l];
  const int k = c.layers[l].engram;
  const int ncol = c.n_hash_cols(), hd = c.engram_head_dim;
  std::vector<int64_t> rows(static_cast<size_t>(ncol));
  engram_step_rows(c, x.m.meta, k, x.st.history.data(), pos, 1, rows.data());
  std::vector<float> e(static_cast<size_t>(ncol) * hd), kv(static_cast<size_t>(c.dim) * (c.hc + 1));
  STRATA_TRY(x.m.engram_rows->rows(k, rows, e.data()));
  linear_bf16(L.e_wkv.w.data(), e.data(), L.e_wkv.rows, L.e_wkv.cols, kv.data());
  engram_gate(H, kv.data(), kv.data() + int64_t{c.hc} * c.dim, L.e_q.w.data(), L.e_k.w.data(), c.hc, c.dim,
              c.eps);
  return {};
}

// A compressed entry j of KV source l from its latent: index key (owners) and KV row.
void emit_compressed(const Ctx& x, int l, int64_t j, float* latent) {
  const Config& c = x.c;
  const LayerW& L = x.m.w.layers[l];
  V41LayerState& s = x.st.layers[l];
  const int r = c.layers[l].ratio;
  if (c.layers[l].owns_index_k) {
    float* k = s.ik->row(j);
    std::vector<float> t(static_cast<size_t>(c.idx_dim));
    linear_bf16(L.i_wk.w.data(), latent, c.idx_dim, c.head_dim, t.data());
    rms_norm_bf16(t.data(), L.i_knorm.data(), c.idx_dim, c.eps, k);
    x.m.rope_comp.apply(k, 1, c.idx_dim, j * r, false);
    fake_quant_fp4(k, c.idx_dim, 32);
  }
  float* kv = s.ckv->row(j);
  std::memcpy(kv, latent, sizeof(float) * c.head_dim);
  x.m.rope_comp.apply(kv, 1, c.head_dim, j * r, false);
  fake_quant_fp4_e4m3(kv, c.head_dim, 16);
  s.n_comp = j + 1;
}

// Compressor of KV source l fed with token x_in at `pos`: ratio 1 emits every token, ratio 2
// pools each pair with a per-channel softmax over the two gate scores (f32).
void compress(const Ctx& x, int l, const float* x_in, int64_t pos) {
  const Config& c = x.c;
  const LayerW& L = x.m.w.layers[l];
  V41LayerState& s = x.st.layers[l];
  const int r = c.layers[l].ratio, hd = c.head_dim;
  std::vector<float> a(static_cast<size_t>(hd)), latent(static_cast<size_t>(hd));
  if (r == 1) {
    linear_bf16(L.c_wkv.w.data(), x_in, hd, c.dim, a.data());
    rms_norm_bf16(a.data(), L.c_norm.data(), hd, c.eps, latent.data());
    emit_compressed(x, l, pos, latent.data());
    return;
  }
  std::vector<float> g(static_cast<size_t>(hd));
  linear_f32(L.c_wkv.w.data(), x_in, hd, c.dim, pos + 1, a.data());
  linear_f32(L.c_wgate.w.data(), x_in, hd, c.dim, pos + 1, g.data());
  float* pend = s.pend->row(0);
  if (pos % 2 == 0) {
    std::memcpy(pend, a.data(), sizeof(float) * hd);
    std::memcpy(pend + hd, g.data(), sizeof(float) * hd);
    return;
  }
  pool_ratio2(pend, pend + hd, a.data(), g.data(), hd, a.data());
  rms_norm_bf16(a.data(), L.c_norm.data(), hd, c.eps, latent.data());
  emit_compressed(x, l, pos / 2, latent.data());
}

// Index source l scores the index keys of its KV source for the query at `pos` (token t of the
// step) and publishes the selection (and, on the candidate layer, the candidate mask).
void index_select(const Ctx& x, int l, const float* x_in, const float* qr, int64_t pos, int t) {
  const Config& c = x.c;
  const LayerW& L = x.m.w.layers[l];
  const LayerCfg& lc = c.layers[l];
  const V41LayerState& src = x.st.layers[lc.kv_src];
  const int IH = c.idx_heads, ID = c.idx_dim;
  const int64_t lens = (pos + 1) / lc.ratio;
  std::vector<int32_t>& out = x.st.sel[l][t];
  if (lens == 0) {
    out.clear();
    if (l == c.cand_layer) x.st.cand[t].clear();
    return;
  }
  std::vector<float> q(static_cast<size_t>(IH) * ID), w(static_cast<size_t>(IH)),
      sc(static_cast<size_t>(lens));
  linear_bf16(L.i_wq_b.w.data(), qr, int64_t{IH} * ID, c.q_lora, q.data());
  x.m.rope_comp.apply(q.data(), IH, ID, pos, false);
  fake_quant_fp4(q.data(), int64_t{IH} * ID, 32);
  linear_bf16(L.i_wproj.w.data(), x_in, IH, c.dim, w.data());
  const float wscale = static_cast<float>(std::pow(ID, -0.5) * std::pow(IH, -0.5));
  for (int h = 0; h < IH; ++h) w[h] = bf16r(w[h] * wscale);
  for (int64_t s = 0; s < lens; ++s) {
    const float* k = src.ik->row(s);
    float acc = 0.0f;
    for (int h = 0; h < IH; ++h) {
      double dot = 0.0;
      for (int d = 0; d < ID; ++d) dot += static_cast<double>(q[h * ID + d]) * k[d];
      const float qk = std::max(bf16r(static_cast<float>(dot)), 0.0f);
      acc += bf16r(qk * w[h]);
    }
    sc[s] = bf16r(acc);
  }
  const uint8_t* mask = nullptr;
  if (l == c.cand_layer) {
    candidate_mask(sc.data(), lens, c.cand_block, c.cand_topk_blocks, &x.st.cand[t]);
  } else if (c.cand_layer >= 0 && l > c.cand_layer) {
    STRATA_ASSERT(static_cast<int64_t>(x.st.cand[t].size()) == lens);
    mask = x.st.cand[t].data();
  }
  select_topk(sc.data(), mask, lens, c.idx_topk, &out);
}

// Sparse attention of layer l for token t at pos; x_in bf16 [dim] -> out bf16 [dim].
void attention(const Ctx& x, int l, const float* x_in, int64_t pos, int t, float* out) {
  const Config& c = x.c;
  const LayerW& L = x.m.w.layers[l];
  const LayerCfg& lc = c.layers[l];
  V41LayerState& s = x.st.layers[l];
  const int H = c.n_heads, hd = c.head_dim, W = c.window;
  const Rope& rope = lc.ratio ? x.m.rope_comp : x.m.rope_plain;
  std::vector<float> tq(static_cast<size_t>(c.q_lora)), qr(static_cast<size_t>(c.q_lora));
  linear_bf16(L.wq_a.w.data(), x_in, c.q_lora, c.dim, tq.data());
  rms_norm_bf16(tq.data(), L.q_norm.data(), c.q_lora, c.eps, qr.data());
  std::vector<float> q(static_cast<size_t>(H) * hd);
  linear_bf16(L.wq_b.w.data(), qr.data(), int64_t{H} * hd, c.q_lora, q.data());
  rope.apply(q.data(), H, hd, pos, false);
  std::vector<float> kv(static_cast<size_t>(hd)), tk(static_cast<size_t>(hd));
  linear_bf16(L.wkv.w.data(), x_in, hd, c.dim, tk.data());
  rms_norm_bf16(tk.data(), L.kv_norm.data(), hd, c.eps, kv.data());
  rope.apply(kv.data(), 1, hd, pos, false);
  fake_quant_fp8(kv.data(), hd, 32);
  std::memcpy(s.win->row(pos), kv.data(), sizeof(float) * hd);

  std::vector<const float*> keys;
  for (int64_t p = std::max<int64_t>(0, pos - W + 1); p <= pos; ++p) keys.push_back(s.win->row(p));
  if (lc.ratio) {
    if (lc.kv_source) compress(x, l, x_in, pos);
    if (lc.index_source) index_select(x, l, x_in, qr.data(), pos, t);
    const std::vector<int32_t>& sel = x.st.sel[lc.idx_src][t];
    const V41LayerState& src = x.st.layers[lc.kv_src];
    for (int32_t j : sel) keys.push_back(src.ckv->row(j));
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<float> o(static_cast<size_t>(H) * hd);
  const bool small = f32_gemm_small(static_cast<int64_t>(keys.size()), hd, H);
  for (int h = 0; h < H; ++h)
    attend_head(q.data() + h * hd, keys.data(), keys.size(), hd, scale, L.attn_sink[h], small,
                o.data() + h * hd);
  rope.apply(o.data(), H, hd, pos, true);
  const int G = c.o_groups, R = c.o_lora;
  const int64_t gw = int64_t{H} * hd / G;
  std::vector<float> z(static_cast<size_t>(G) * R);
  for (int g = 0; g < G; ++g)
    linear_bf16(L.wo_a.row(int64_t{g} * R), o.data() + g * gw, R, gw, z.data() + g * R);
  linear_bf16(L.wo_b.w.data(), z.data(), c.dim, int64_t{G} * R, out);
}

void expert(const Config& c, const Mat& w1, const Mat& w3, const Mat& w2, const float* x_in, float weight,
            bool weighted, float* y) {
  const int64_t I = w1.rows;
  std::vector<float> g(static_cast<size_t>(I)), u(static_cast<size_t>(I));
  linear_bf16(w1.w.data(), x_in, I, c.dim, g.data());
  linear_bf16(w3.w.data(), x_in, I, c.dim, u.data());
  const float lim = c.swiglu_limit;
  for (int64_t i = 0; i < I; ++i) {
    float gi = g[i], ui = u[i];
    if (lim > 0) {
      ui = std::clamp(ui, -lim, lim);
      gi = std::min(gi, lim);
    }
    float a = gi / (1.0f + std::exp(-gi)) * ui;
    if (weighted) a = weight * a;
    g[i] = bf16r(a);
  }
  linear_bf16(w2.w.data(), g.data(), c.dim, I, y);
}

void moe(const Ctx& x, int l, const float* x_in, int64_t pos, float* out) {
  const Config& c = x.c;
  const LayerW& L = x.m.w.layers[l];
  const int E = c.n_experts, K = c.n_active;
  std::vector<float> s(static_cast<size_t>(E));
  linear_f32(L.gate.w.data(), x_in, E, c.dim, pos + 1, s.data());
  for (int e = 0; e < E; ++e) {
    const float v = s[e] / c.gate_temp;
    const float sp = v > 20.0f ? v : std::log1p(std::exp(v));
    s[e] = std::sqrt(sp);
  }
  std::vector<int> ids(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) ids[e] = e;
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int a, int b) { return s[a] + L.gate_bias[a] > s[b] + L.gate_bias[b]; });
  ids.resize(static_cast<size_t>(K));
  std::vector<float> wts(static_cast<size_t>(K));
  float sum = 0.0f;
  for (int i = 0; i < K; ++i) sum += (wts[i] = s[ids[i]]);
  for (int i = 0; i < K; ++i) {
    if (c.norm_topk && K > 1) wts[i] /= sum;
    wts[i] *= c.route_scale;
  }
  std::vector<int> order(static_cast<size_t>(K));
  for (int i = 0; i < K; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return ids[a] < ids[b]; });
  std::vector<float> y(static_cast<size_t>(c.dim), 0.0f), ye(static_cast<size_t>(c.dim));
  for (int i : order) {
    expert(c, L.w1[ids[i]], L.w3[ids[i]], L.w2[ids[i]], x_in, wts[i], true, ye.data());
    for (int64_t d = 0; d < c.dim; ++d) y[d] += ye[d];
  }
  expert(c, L.sw1, L.sw3, L.sw2, x_in, 1.0f, false, ye.data());
  for (int64_t d = 0; d < c.dim; ++d) out[d] = bf16r(y[d] + ye[d]);
}

}  // namespace

Status v41_forward(const V41Model& m, V41State& st, std::span<const int32_t> tokens, int64_t pos0,
                   bool all_logits, float* logits, ThreadPool& pool) {
  (void)pool;
  const Config& c = m.cfg;
  const int64_t n = static_cast<int64_t>(tokens.size());
  STRATA_ASSERT(n >= 1 && n <= st.n_batch && pos0 + n <= st.n_ctx);
  if (static_cast<int64_t>(st.history.size()) != pos0)
    return err("deepseek_v41: forward at position %lld but the state holds %zu tokens",
               static_cast<long long>(pos0), st.history.size());
  for (int64_t t = 0; t < n; ++t) st.history.push_back(tokens[t]);
  // Engram rows depend on token ids alone: announce the whole step's rows before any layer runs.
  EngramRowSource& er = *m.engram_rows;
  struct StepEnd {
    EngramRowSource& s;
    ~StepEnd() { s.end_step(); }
  };
  er.begin_step(tokens);
  const StepEnd step_end{er};
  for (int k = 0; k < static_cast<int>(c.engram_layers.size()); ++k) {
    std::vector<int64_t> rows(static_cast<size_t>(n * c.n_hash_cols()));
    engram_step_rows(c, m.meta, k, st.history.data(), pos0, n, rows.data());
    STRATA_TRY(er.prefetch(k, rows));
  }
  Ctx x{m, c, st};
  const int64_t D = c.dim, hcD = int64_t{c.hc} * D;
  for (int64_t t = 0; t < n; ++t) {
    float* H = st.H.data() + t * hcD;
    for (int s = 0; s < c.hc; ++s) std::memcpy(H + s * D, m.w.embed.row(tokens[t]), sizeof(float) * D);
    float* p = st.pre.data() + t * c.hc;
    for (int s = 0; s < c.hc; ++s) p[s] = s == 0 ? 1.0f : 0.0f;  // layer 0 reads stream 0
  }
  for (int l = 0; l < c.n_layers; ++l) st.sel[l].resize(static_cast<size_t>(n));
  std::vector<float> u(static_cast<size_t>(D)), a(static_cast<size_t>(D)), y(static_cast<size_t>(D));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerW& L = m.w.layers[l];
    for (int64_t t = 0; t < n; ++t) {
      const int64_t pos = pos0 + t;
      float* H = st.H.data() + t * hcD;
      float* pre = st.pre.data() + t * c.hc;
      if (c.layers[l].engram >= 0) STRATA_TRY(engram(x, l, pos, H));
      // Single-pass mHC: this site's pre collapses the NEXT sub-layer's input.
      ds4::HcCoeffs ca, cf;
      hc_site(c, L.hc_attn, H, pos + 1, &ca);
      hc_collapse(H, pre, c.hc, c.dim, u.data());
      rms_norm_bf16(u.data(), L.attn_norm.data(), D, c.eps, a.data());
      attention(x, l, a.data(), pos, static_cast<int>(t), y.data());
      hc_post(ca, y.data(), c.hc, c.dim, H);
      hc_site(c, L.hc_ffn, H, pos + 1, &cf);
      hc_collapse(H, ca.pre, c.hc, c.dim, u.data());
      rms_norm_bf16(u.data(), L.ffn_norm.data(), D, c.eps, a.data());
      moe(x, l, a.data(), pos, y.data());
      hc_post(cf, y.data(), c.hc, c.dim, H);
      for (int s = 0; s < c.hc; ++s) pre[s] = cf.pre[s];
    }
  }
  const int64_t V = c.vocab;
  for (int64_t t = all_logits ? 0 : n - 1; t < n; ++t) {
    hc_collapse(st.H.data() + t * hcD, st.pre.data() + t * c.hc, c.hc, c.dim, u.data());
    rms_norm_bf16(u.data(), m.w.norm.data(), D, c.eps, a.data());
    linear_f32(m.w.head.w.data(), a.data(), V, D, 1, logits + (all_logits ? t * V : 0));
  }
  return {};
}

}  // namespace strata::v41
