// DeepSeek-V4.1 forward driver (see v41_forward.h): the embeddings, the Engram lookups, the mHC
// sites and the head over all rows of the batch; the sub-layers in v41_attention.cpp / v41_moe.cpp.
// Rounding follows the PyTorch reference: every bf16 Linear / norm / rope output is rounded to
// bf16 (v41_quant.h); mHC mixes, Sinkhorn, the router, the compressor's ratio-2 pooling and the
// attention softmax run in f32.
#include "model/deepseek_v41/v41_forward.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/linear.h"
#include "model/deepseek4/ds4_math.h"
#include "model/deepseek4/ds4_mhc.h"
#include "model/deepseek_v41/v41_blocks.h"
#include "model/deepseek_v41/v41_engram.h"
#include "model/deepseek_v41/v41_quant.h"
#include "model/deepseek_v41/v41_step.h"

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

KvSpec v41_kv_spec_typed(KvSpec s, const KvTypes& t) {
  if (!t.is_default) return kv_spec_typed(std::move(s), t);
  for (KvLayerSpec& l : s.layers)
    for (KvPartSpec& p : l.parts) p.type = p.has_native ? p.native : KvType::f32;
  return s;
}

Result<KvSpec> v41_kv_spec_for(const Config& c, const KvTypes& t) {
  if (!t.is_default)
    for (KvType x : {t.k, t.index_type()})
      if (x != KvType::f32)
        return err(
            "deepseek_v41: KV type %s is not supported: its caches hold the reference's own types "
            "(FP8 window, NVFP4-like compressed KV, MXFP4 index keys: the default) or f32 (-ctk f32)",
            kv_type_name(x));
  KvSpec s = v41_kv_spec_typed(v41_kv_spec(c), t);
  STRATA_TRY(kv_spec_check(s, "deepseek_v41"));
  return s;
}

V41State::V41State(const V41Model& m, int n_ctx_, int n_batch_, const V41State* share_scratch,
                   const KvSpec* spec)
    : kv(spec ? *spec : v41_kv_spec(m.cfg), n_ctx_, n_batch_, /*rotate=*/false),
      n_ctx(n_ctx_),
      n_batch(n_batch_) {
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
  if (share_scratch) {
    scratch = share_scratch->scratch;
    return;
  }
  scratch = std::make_shared<V41Scratch>();
  scratch->H.assign(static_cast<size_t>(n_batch) * c.hc * c.dim, 0.0f);
  scratch->pre.assign(static_cast<size_t>(n_batch) * c.hc, 0.0f);
  scratch->sel.resize(static_cast<size_t>(c.n_layers));
  for (auto& s : scratch->sel) s.resize(static_cast<size_t>(n_batch));
  scratch->cand.resize(static_cast<size_t>(n_batch));
}

void V41State::reset() {
  history.clear();
  for (auto& s : layers) s.n_comp = 0;
}

namespace {

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

// Engram layer l over every row: its rows (row ids of the step, `ids` [n][ncol]) fetched row by
// row on this thread (the source's protocol), projected together, then gated into each row's
// streams.
Status engram(Step& s, int l, const int64_t* ids, float* H) {
  const Config& c = s.m.cfg;
  const LayerW& L = s.m.w.layers[l];
  const int k = c.layers[l].engram;
  const int64_t n = s.n(), ncol = c.n_hash_cols(), ew = ncol * c.engram_head_dim;
  const int64_t hcD = int64_t{c.hc} * c.dim, kvw = L.e_wkv.rows;
  std::vector<float> e(static_cast<size_t>(n * ew)), kv(static_cast<size_t>(n * kvw));
  for (int64_t r = 0; r < n; ++r)
    STRATA_TRY(s.m.engram_rows->rows(k, std::span<const int64_t>(ids + r * ncol, static_cast<size_t>(ncol)),
                                     e.data() + r * ew));
  lin(s, L.e_wkv, e.data(), n, kv.data());
  for (int64_t r = 0; r < n; ++r) {
    const float* kr = kv.data() + r * kvw;
    engram_gate(H + r * hcD, kr, kr + hcD, L.e_q.w.data(), L.e_k.w.data(), c.hc, c.dim, c.eps);
  }
  return {};
}

// One mHC site before a sub-layer, per row: this site's coefficients from the streams, and the
// sub-layer's normed input collapsed with the scratch's pre (single-pass mHC: the previous site's),
// which then becomes this site's.
// Fast numerics: the mixes of every row in one Linear, then deepseek4's mHC arithmetic.
void site_in_fast(Step& s, const HcSite& site, const std::vector<float>& norm, ds4::HcCoeffs* co, float* x) {
  const Config& c = s.m.cfg;
  const int64_t D = c.dim, hcD = int64_t{c.hc} * D, nmix = (2 + c.hc) * c.hc;
  const float* H = s.sc.H.data();
  float* pre = s.sc.pre.data();
  std::vector<float> mixes(static_cast<size_t>(s.n() * nmix));
  lin(s, site.fn, H, s.n(), mixes.data(), s.s_ref.data());
  s.pool.parallel_for(s.n(), [&](int64_t r0, int64_t r1) {
    std::vector<float> u(static_cast<size_t>(D));
    for (int64_t r = r0; r < r1; ++r) {
      float* mx = mixes.data() + r * nmix;
      const float rs = ds4::rms_scale(H + r * hcD, hcD, c.eps);
      for (int64_t k = 0; k < nmix; ++k) mx[k] *= rs;
      ds4::hc_coeffs(mx, site.scale.data(), site.base.data(), c.hc, c.sinkhorn_iters, c.hc_eps, &co[r]);
      ds4::hc_collapse(H + r * hcD, pre + r * c.hc, c.hc, D, u.data());
      for (float& v : u) v = bf16r(v);
      norm_bf16(s, u.data(), norm.data(), D, c.eps, x + r * D);
      std::memcpy(pre + r * c.hc, co[r].pre, sizeof(float) * c.hc);
    }
  });
}

void site_in(Step& s, const HcSite& site, const std::vector<float>& norm, ds4::HcCoeffs* co, float* x) {
  if (s.fast()) return site_in_fast(s, site, norm, co, x);
  const Config& c = s.m.cfg;
  const int64_t D = c.dim, hcD = int64_t{c.hc} * D;
  const float* H = s.sc.H.data();
  float* pre = s.sc.pre.data();
  s.pool.parallel_for(s.n(), [&](int64_t r0, int64_t r1) {
    std::vector<float> u(static_cast<size_t>(D));
    for (int64_t r = r0; r < r1; ++r) {
      hc_site(c, site, H + r * hcD, s.s_ref[r], &co[r]);
      hc_collapse(H + r * hcD, pre + r * c.hc, c.hc, D, u.data());
      rms_norm_bf16(u.data(), norm.data(), D, c.eps, x + r * D);
      std::memcpy(pre + r * c.hc, co[r].pre, sizeof(float) * c.hc);
    }
  });
}

// The streams after a sub-layer (output y [n][dim]) per row: H = bf16(post y + comb^T H).
void site_out(Step& s, const ds4::HcCoeffs* co, const float* y) {
  const Config& c = s.m.cfg;
  const int64_t D = c.dim, hcD = int64_t{c.hc} * D;
  float* H = s.sc.H.data();
  if (!s.fast()) {
    for (int64_t t = 0; t < s.n(); ++t) hc_post(co[t], y + t * D, c.hc, D, H + t * hcD);
    return;
  }
  s.pool.parallel_for(s.n(), [&](int64_t r0, int64_t r1) {
    std::vector<float> R(static_cast<size_t>(hcD));
    for (int64_t t = r0; t < r1; ++t) {
      float* h = H + t * hcD;
      std::memcpy(R.data(), h, sizeof(float) * hcD);
      ds4::hc_post(y + t * D, R.data(), co[t], c.hc, D, h);
      for (int64_t i = 0; i < hcD; ++i) h[i] = bf16r(h[i]);
    }
  });
}

}  // namespace

Status v41_forward(const V41Model& m, const Batch& b, float* logits, ThreadPool& pool) {
  const Config& c = m.cfg;
  const int64_t n = b.n();
  if (b.runs.empty()) return err("deepseek_v41: a batch without sequences");
  V41State& lender = static_cast<V41State&>(*b.runs[0].state);
  if (n < 1 || n > lender.n_batch)
    return err("deepseek_v41: batch of %lld tokens (n_batch %d)", static_cast<long long>(n), lender.n_batch);
  Step s{m,
         b,
         *lender.scratch,
         pool,
         std::vector<int64_t>(static_cast<size_t>(n)),
         std::vector<int64_t>(static_cast<size_t>(n)),
         m.numerics == V41Numerics::fast ? lender.experts : nullptr};
  for (const SeqRun& r : b.runs) {
    V41State& st = s.state(r);
    if (r.pos0 + r.n > st.n_ctx)
      return err("deepseek_v41: positions up to %lld exceed n_ctx %d", static_cast<long long>(r.pos0 + r.n),
                 st.n_ctx);
    if (static_cast<int64_t>(st.history.size()) < r.pos0)
      return err("deepseek_v41: forward at position %lld but the state holds %zu tokens",
                 static_cast<long long>(r.pos0), st.history.size());
    st.history.resize(static_cast<size_t>(r.pos0));  // a failed step may have left tokens past n_past
    for (int64_t t = 0; t < r.n; ++t) {
      st.history.push_back(b.tokens[static_cast<size_t>(r.t0 + t)]);
      s.pos[static_cast<size_t>(r.t0 + t)] = r.pos0 + t;
      s.s_ref[static_cast<size_t>(r.t0 + t)] = r.pos0 + t + 1;
    }
  }
  // Engram rows depend on token ids alone: announce the whole step's rows before any layer runs.
  EngramRowSource& er = *m.engram_rows;
  struct StepEnd {
    EngramRowSource& s;
    ~StepEnd() { s.end_step(); }
  };
  er.begin_step(b.tokens);
  const StepEnd step_end{er};
  const int64_t ncol = c.n_hash_cols();
  std::vector<std::vector<int64_t>> eids(c.engram_layers.size());
  for (size_t k = 0; k < c.engram_layers.size(); ++k) {
    eids[k].resize(static_cast<size_t>(n * ncol));
    for (const SeqRun& r : b.runs)
      engram_step_rows(c, m.meta, static_cast<int>(k), s.state(r).history.data(), r.pos0, r.n,
                       eids[k].data() + r.t0 * ncol);
    STRATA_TRY(er.prefetch(static_cast<int>(k), eids[k]));
  }
  const ExpertStepScope expert_step(s.experts, n);
  const int64_t D = c.dim, hcD = int64_t{c.hc} * D;
  float* H = s.sc.H.data();
  float* pre = s.sc.pre.data();
  s.sc.arena.reset();
  for (int64_t t = 0; t < n; ++t) {
    const int32_t tok = b.tokens[static_cast<size_t>(t)];
    if (s.fast())
      embedding_row(m.w.embed.tv, tok, H + t * hcD);
    else
      std::memcpy(H + t * hcD, m.w.embed.row(tok), sizeof(float) * D);
    for (int st = 1; st < c.hc; ++st) std::memcpy(H + t * hcD + st * D, H + t * hcD, sizeof(float) * D);
    for (int st = 0; st < c.hc; ++st) pre[t * c.hc + st] = st == 0 ? 1.0f : 0.0f;  // layer 0 reads stream 0
  }
  for (int l = 0; l < c.n_layers; ++l) s.sc.sel[l].resize(static_cast<size_t>(n));
  std::vector<ds4::HcCoeffs> ca(static_cast<size_t>(n)), cf(static_cast<size_t>(n));
  std::vector<float> x(static_cast<size_t>(n * D)), y(static_cast<size_t>(n * D));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerW& L = m.w.layers[l];
    if (c.layers[l].engram >= 0)
      STRATA_TRY(engram(s, l, eids[static_cast<size_t>(c.layers[l].engram)].data(), H));
    // Single-pass mHC: a site's pre collapses the NEXT sub-layer's input.
    site_in(s, L.hc_attn, L.attn_norm, ca.data(), x.data());
    attention_layer(s, l, x.data(), y.data());
    site_out(s, ca.data(), y.data());
    site_in(s, L.hc_ffn, L.ffn_norm, cf.data(), x.data());
    if (s.fast())
      STRATA_TRY(moe_layer_fast(s, l, x.data(), y.data()));
    else
      moe_layer(s, l, x.data(), y.data());
    site_out(s, cf.data(), y.data());
  }
  // The wanted rows: collapse, final norm, the head (the f32 Linear of a one-token forward).
  const int64_t nout = static_cast<int64_t>(b.out_rows.size());
  if (nout == 0) return {};
  std::vector<float> u(static_cast<size_t>(D)), a(static_cast<size_t>(nout * D));
  for (int64_t k = 0; k < nout; ++k) {
    const int64_t t = b.out_rows[static_cast<size_t>(k)];
    hc_collapse(H + t * hcD, pre + t * c.hc, c.hc, D, u.data());
    norm_bf16(s, u.data(), m.w.norm.data(), D, c.eps, a.data() + k * D);
  }
  const std::vector<int64_t> one(static_cast<size_t>(nout), 1);
  lin(s, m.w.head, a.data(), nout, logits, one.data());
  return {};
}

}  // namespace strata::v41
