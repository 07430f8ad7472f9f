#include "model/deepseek4/ds4_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/sparse_attention.h"
#include "model/deepseek4/ds4_indexer.h"
#include "model/deepseek4/ds4_math.h"
#include "model/deepseek4/ds4_mhc.h"
#include "model/deepseek4/ds4_moe.h"
#include "kernels/linear.h"
#include "model/blocks/moe.h"

namespace strata::ds4 {

namespace {

// The indexer's scoring (attention_block): tokens per chunk (at most kIdxTokens, and kIdxScores
// scores), keys per block.
constexpr int64_t kIdxTokens = 16, kIdxScores = int64_t{1} << 16, kIdxKeys = 64;

// A block's view of the step: the whole batch (the FFN, mHC, embeddings, head), or one sequence's
// run of it (attention: st holds that sequence's caches). The scratch is always the arena of the
// state that lends it to the step.
struct Ctx {
  const Ds4Params& p;
  const Ds4Weights& w;
  const Ds4DeviceWeights& dw;
  Ds4State& st;
  Arena& arena;
  ThreadPool& pool;
  std::span<const int32_t> tokens;
  int64_t pos0;
  int64_t n;
  Status status;                     // first failure inside a block (an expert read); the forward returns it
  const float* min_share = nullptr;  // per row, its sequence's SeqKnobs::expert_min_share; null: none
  int64_t itopk = 0;  // attention (one sequence's run): its indexer top-k (SeqKnobs::index_topk)
  template <class T>
  T* alloc(size_t count) {
    return arena.alloc<T>(count);
  }
  // y [rows][out] = x [rows][in] · wᵀ on the device the layers were placed on. After a failure
  // (kept in status, returned by the forward at the layer's end) the remaining ops are skipped.
  void lin(const DeviceMat& wt, const float* x, int64_t rows, float* y) {
    if (!status.ok()) return;
    DeviceLinearWork lw;
    lw.w = wt;
    lw.x = x;
    lw.n = rows;
    lw.y = y;
    lw.host_scratch = &arena;
    Result<DeviceTicket> t = dw.dev->run_linear(lw);
    status = t.ok() ? dw.dev->wait(t.value()) : t.status();
  }
};

// Runs one compressor over the batch; completed entries (entry j at entry_of(j), host memory) are
// normed, roped (and for the indexer's keys rotated).
template <class EntryOf>
void run_compressor(Ctx& c, const Ds4Compressor& cw, const Ds4DeviceCompressor& dc, CompressorState& state,
                    int ratio, int width, int il, const float* x, EntryOf&& entry_of, bool rotate) {
  const CompressorShape s = comp_shape(ratio, width);
  const int64_t in_w = s.in_width(), n = c.n;
  const size_t mark = c.arena.mark();
  float* a = c.alloc<float>(n * in_w);
  float* b = c.alloc<float>(n * in_w);
  c.lin(dc.wkv, x, n, a);
  c.lin(dc.wgate, x, n, b);
  const RopeParams rope = c.p.rope_for(il);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = c.pos0 + t;
    float* bt = b + t * in_w;
    const float* ape = cw.ape + (pos % ratio) * in_w;
    for (int64_t i = 0; i < in_w; ++i) bt[i] += ape[i];
    float* entry =
        (pos + 1) % ratio == 0 ? entry_of(pos / ratio) : nullptr;  // written when pos closes a block
    if (state.push(pos, a + t * in_w, bt, entry)) {
      compressor_finish(s, cw.norm, c.p.eps, rope, pos / ratio, entry);
      if (rotate && c.st.hb > 0) hadamard_rotate(c.st.hadamard.data(), c.st.hb, entry, width);
    }
  }
  c.arena.rewind(mark);
}

// Attention sub-layer: x [n][d] (normed input) -> y [n][d].
void attention_block(Ctx& c, int il, const float* x, float* y) {
  const Ds4Params& p = c.p;
  const Ds4Layer& l = c.w.layers[il];
  const Ds4DeviceLayer& dl = c.dw.layers[il];
  Ds4LayerState& ls = c.st.layers[il];
  KvLayer& kvl = c.st.kv.layer(il);
  const int64_t n = c.n, hd = p.head_dim, nh = p.n_head, r = p.ratios[il];
  const RopeParams rope = p.rope_for(il);
  const size_t mark = c.arena.mark();

  float* qr = c.alloc<float>(n * p.q_lora);
  c.lin(dl.wq_a, x, n, qr);
  for (int64_t t = 0; t < n; ++t) rms_norm(qr + t * p.q_lora, l.q_a_norm, p.q_lora, p.eps, qr + t * p.q_lora);
  float* q = c.alloc<float>(n * nh * hd);
  c.lin(dl.wq_b, qr, n, q);
  float* kv = c.alloc<float>(n * hd);
  c.lin(dl.wkv, x, n, kv);
  float* cs = c.alloc<float>(p.n_rot);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = c.pos0 + t;
    float* qt = q + t * nh * hd;
    for (int64_t h = 0; h < nh; ++h) rms_norm(qt + h * hd, nullptr, hd, p.eps, qt + h * hd);
    rope_cache(rope, pos, 1.0f, cs);
    rope_rows_cached(cs, p.n_rot, qt, nh, hd);
    float* kt = kv + t * hd;
    rms_norm(kt, l.kv_norm, hd, p.eps, kt);
    rope_rows_cached(cs, p.n_rot, kt, 1, hd);
  }

  // compressed entries (and indexer keys) of every block this batch completes: entries
  // crow0 .. crow0 + n_new − 1, which the attention op writes into the device's rows
  const int64_t crow0 = r ? c.pos0 / r : 0, n_new = r ? (c.pos0 + n) / r - crow0 : 0;
  float* cnew = c.alloc<float>(n_new * hd + 1);
  float* qi = nullptr;
  float* iw = nullptr;
  if (r != 0)
    run_compressor(
        c, l.comp, dl.comp, ls.comp_state, static_cast<int>(r), static_cast<int>(hd), il, x,
        [&](int64_t j) { return cnew + (j - crow0) * hd; }, false);
  if (r == 4) {
    // the new keys pooled in f32, then stored in the part's type (kv_store: quant/'s from_float)
    const KvRows& ik = kvl.part(ls.index).view();
    float* inew = c.alloc<float>(n_new * p.ihd + 1);
    run_compressor(
        c, l.idx_comp, dl.idx_comp, ls.index_state, 4, p.ihd, il, x,
        [&](int64_t j) { return inew + (j - crow0) * p.ihd; }, true);
    for (int64_t j = 0; j < n_new; ++j) kv_store(ik, crow0 + j, 0, inew + j * p.ihd, p.ihd);
    qi = c.alloc<float>(n * p.ih * p.ihd);
    c.lin(dl.idx_q_b, qr, n, qi);
    iw = c.alloc<float>(n * p.ih);
    c.lin(dl.idx_proj, x, n, iw);
    const float iscale = 1.0f / std::sqrt(static_cast<float>(p.ihd * p.ih));
    for (int64_t t = 0; t < n; ++t) {
      float* qt = qi + t * p.ih * p.ihd;
      rope_rows(rope, c.pos0 + t, qt, p.ih, p.ihd, false);
      if (c.st.hb > 0) hadamard_rotate(c.st.hadamard.data(), c.st.hb, qt, int64_t{p.ih} * p.ihd);
      for (int h = 0; h < p.ih; ++h) iw[t * p.ih + h] *= iscale;
    }
  }

  // CSA: the indexer's choice of each token's compressed entries (on the host, over its keys):
  // tokens in chunks of itc, a chunk's visible keys scored a block of kIdxKeys at a time (index
  // keys are rows of a RowCache, not assumed contiguous; a typed block converted to f32 once for
  // the chunk's tokens)
  const int64_t max_comp = r ? (c.pos0 + n) / r : 0;
  const int64_t max_sel = r == 4 ? std::min<int64_t>(c.itopk, max_comp) : 0;
  const int64_t itc = std::clamp<int64_t>(kIdxScores / (max_comp + 1), 1, kIdxTokens);
  int32_t* sel = c.alloc<int32_t>(n * max_sel + 1);  // [n][max_sel] the indexer's choices
  int32_t* sel_n = c.alloc<int32_t>(n);
  float* iscore = c.alloc<float>(itc * (max_comp + 1));  // [itc][max_comp + 1]
  int32_t* order = c.alloc<int32_t>(max_comp + 1);       // topk_indices' scratch
  float* kblk = c.alloc<float>(kIdxKeys * p.ihd);        // a typed key block in f32
  for (int64_t t0 = 0; r == 4 && t0 < n; t0 += itc) {
    const int64_t t1 = std::min(n, t0 + itc), vmax = compressed_visible(c.pos0 + t1 - 1, 4);
    const KvRows& ik = kvl.part(ls.index).view();
    for (int64_t j0 = 0; j0 < vmax; j0 += kIdxKeys) {
      const int64_t j1 = std::min(vmax, j0 + kIdxKeys);
      if (ik.type != GgmlType::f32)
        for (int64_t j = j0; j < j1; ++j) kv_to_f32(ik, j, kblk + (j - j0) * p.ihd);
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t j = j0; j < std::min(j1, compressed_visible(c.pos0 + t, 4)); ++j)
          indexer_scores(qi + t * p.ih * p.ihd, iw + t * p.ih,
                         ik.type == GgmlType::f32 ? ik.row(j) : kblk + (j - j0) * p.ihd, 1, p.ih, p.ihd,
                         iscore + (t - t0) * (max_comp + 1) + j);
    }
    for (int64_t t = t0; t < t1; ++t) {
      int32_t* chosen = sel + t * max_sel;
      int64_t k = 0;
      if (const int64_t vis = compressed_visible(c.pos0 + t, 4); vis > 0) {
        k = topk_indices(iscore + (t - t0) * (max_comp + 1), vis, c.itopk, chosen, order);
        std::sort(chosen, chosen + k);
      }
      sel_n[t] = static_cast<int32_t>(k);
    }
  }

  // the window rows and new entries written, then one attention over the batch's tokens (the
  // core behind the device seam: window rows + visible / selected compressed entries, sinks)
  float* o = c.alloc<float>(n * nh * hd);
  DeviceSparseAttnWork aw;
  aw.layer = il;
  aw.n_head = static_cast<int>(nh);
  aw.head_dim = static_cast<int>(hd);
  aw.window = p.n_swa;
  aw.ratio = static_cast<int>(r);
  aw.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  aw.sinks = dl.sinks;
  aw.win = kvl.part(ls.window).device_rows();
  if (r != 0) aw.comp = kvl.part(ls.comp).device_rows();
  aw.pos0 = c.pos0;
  aw.n = n;
  aw.q = q;
  aw.kv_new = kv;
  aw.comp_new = cnew;
  aw.comp_row0 = crow0;
  aw.n_comp_new = n_new;
  if (r == 4) {
    aw.sel = sel;
    aw.sel_n = sel_n;
    aw.sel_stride = max_sel;
  }
  aw.out = o;
  aw.host_scratch = &c.arena;
  if (c.status.ok()) {
    Result<DeviceTicket> tk = c.dw.dev->run_sparse_attention(aw);
    c.status = tk.ok() ? c.dw.dev->wait(tk.value()) : tk.status();
  }
  if (!c.status.ok()) {
    c.arena.rewind(mark);
    return;
  }
  for (int64_t t = 0; t < n; ++t) rope_rows(rope, c.pos0 + t, o + t * nh * hd, nh, hd, /*inverse=*/true);

  // grouped low-rank output: z_g = wo_a[g] . o_g, y = wo_b . concat(z)
  const int64_t G = p.o_groups, gin = nh * hd / G, ol = p.o_lora;
  float* og = c.alloc<float>(n * gin);
  float* zg = c.alloc<float>(n * ol);
  float* z = c.alloc<float>(n * G * ol);
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t t = 0; t < n; ++t) std::memcpy(og + t * gin, o + t * nh * hd + g * gin, sizeof(float) * gin);
    c.lin(dl.wo_a[static_cast<size_t>(g)], og, n, zg);
    for (int64_t t = 0; t < n; ++t) std::memcpy(z + t * G * ol + g * ol, zg + t * ol, sizeof(float) * ol);
  }
  c.lin(dl.wo_b, z, n, y);
  c.arena.rewind(mark);
}

// FFN sub-layer: x [n][d] (normed input) -> y [n][d] = routed experts + shared expert.
void ffn_block(Ctx& c, int il, const float* x, float* y) {
  const Ds4Params& p = c.p;
  const Ds4Layer& l = c.w.layers[il];
  const int64_t n = c.n, E = p.n_expert, K = p.n_used;
  const size_t mark = c.arena.mark();
  float* lg = c.alloc<float>(n * E);
  c.lin(c.dw.layers[il].gate_inp, x, n, lg);
  float* sc = c.alloc<float>(E);
  int32_t* ids_all = c.alloc<int32_t>(n * K);  // [n][K]
  float* wts_all = c.alloc<float>(n * K);      // [n][K]
  for (int64_t t = 0; t < n; ++t) {
    int32_t* ids = ids_all + t * K;
    float* wts = wts_all + t * K;
    sqrt_softplus_scores(lg + t * E, static_cast<int>(E), sc);
    if (l.tid2eid) {
      std::memcpy(ids, l.tid2eid + static_cast<int64_t>(c.tokens[t]) * K, sizeof(int32_t) * K);
      route_weights(sc, ids, static_cast<int>(K), p.w_norm, p.w_scale, wts);
    } else {
      route_topk(sc, l.probs_b, static_cast<int>(E), static_cast<int>(K), p.w_norm, p.w_scale, ids, wts);
    }
  }
  if (c.min_share) moe_drop_light_choices(c.min_share, n, static_cast<int>(K), ids_all, wts_all);
  ExpertSource* src = c.st.experts;
  if (src) src->on_route(il, x, n, ids_all, wts_all, static_cast<int>(K));
  // The one MoE loop (model/blocks/moe.h): routed experts grouped by expert (one weight pass per
  // used expert per step, streamed or resident), the shared expert in the same pool region.
  if (Status st =
          moe_experts_forward(l.moe_cfg, l.moe_w, x, n, ids_all, wts_all, y, c.pool, c.arena, src, il);
      !st.ok())
    c.status = st;
  c.arena.rewind(mark);
}

// One mHC site around a sub-layer: H [n][hc][d] updated in place.
template <class Block>
void hc_site(Ctx& c, const Ds4HcSite& site, const float* norm_w, float* H, Block&& block) {
  const Ds4Params& p = c.p;
  const int64_t n = c.n, d = p.n_embd, hc = p.hc;
  const size_t mark = c.arena.mark();
  HcCoeffs* co = c.alloc<HcCoeffs>(n);
  float* x = c.alloc<float>(n * d);
  float* y = c.alloc<float>(n * d);
  float* Hn = c.alloc<float>(hc * d);
  float mixes[64];
  for (int64_t t = 0; t < n; ++t) {
    const float* Ht = H + t * hc * d;
    hc_mixes(Ht, p.hc, d, site.fn, p.n_mix(), p.eps, mixes);
    hc_coeffs(mixes, site.scale, site.base, p.hc, p.hc_iters, p.hc_eps, &co[t]);
    hc_collapse(Ht, co[t].pre, p.hc, d, x + t * d);
    rms_norm(x + t * d, norm_w, d, p.eps, x + t * d);
  }
  block(x, y);
  for (int64_t t = 0; t < n; ++t) {
    float* Ht = H + t * hc * d;
    hc_post(y + t * d, Ht, co[t], p.hc, d, Hn);
    std::memcpy(Ht, Hn, sizeof(float) * hc * d);
  }
  c.arena.rewind(mark);
}

}  // namespace

KvSpec ds4_kv_spec(const Ds4Params& p, const KvTypes& types) {
  KvSpec s;
  for (int il = 0; il < p.n_layer; ++il) {
    KvLayerSpec l;
    l.parts.push_back(kv_part_window("window", "sliding-window ring (raw K=V)", p.head_dim, p.n_swa));
    const int r = p.ratios[il];
    if (r == 4) {
      const CompressorShape c = comp_shape(4, p.head_dim), ic = comp_shape(4, p.ihd);
      l.parts.push_back(kv_part_every(KvPartKind::compressed, "csa", "CSA compressed KV (1 row / 4 tokens)",
                                      p.head_dim, 4));
      l.parts.push_back(
          kv_part_every(KvPartKind::indexer, "indexer", "CSA indexer keys (1 row / 4 tokens)", p.ihd, 4));
      l.parts.push_back(kv_part_state("csa_state", "CSA compressor state (8 tokens x kv+score)",
                                      c.state_width(), c.state_rows()));
      l.parts.push_back(kv_part_state("indexer_state", "indexer compressor state (8 tokens x kv+score)",
                                      ic.state_width(), ic.state_rows()));
    } else if (r == 128) {
      const CompressorShape c = comp_shape(128, p.head_dim);
      l.parts.push_back(kv_part_every(KvPartKind::compressed, "hca", "HCA compressed KV (1 row / 128 tokens)",
                                      p.head_dim, 128));
      l.parts.push_back(kv_part_state("hca_state", "HCA compressor state (128 tokens x kv+score)",
                                      c.state_width(), c.state_rows()));
    }
    s.layers.push_back(std::move(l));
  }
  return kv_spec_typed(std::move(s), types);
}

KvTypes ds4_kv_types_resolved(const KvTypes& asked) {
  KvTypes t = asked;
  if (t.is_default) t.k = KvType::f32;  // a tool's f16 default: the f32 caches the fixtures pin
  t.v = t.k;                            // K = V: one row per key
  return t;
}

Result<KvTypes> ds4_kv_types(const Ds4Params& p, const KvTypes& asked) {
  const KvTypes t = ds4_kv_types_resolved(asked);
  STRATA_TRY(kv_spec_check(ds4_kv_spec(p, t), "deepseek4"));
  return t;
}

uint64_t ds4_arena_bytes(const Ds4Params& p, int64_t n_batch, int64_t n_ctx, const KvTypes& types) {
  const int64_t d = p.n_embd;
  const uint64_t per_tok =
      sizeof(float) * static_cast<uint64_t>(4 * p.hc * d + 8 * int64_t{p.n_head} * p.head_dim +
                                            4 * int64_t{p.ih} * p.ihd + 8 * p.n_expert + 8 * d +
                                            2 * int64_t{p.n_used} * (d + p.n_ff_exp)) +
      sizeof(AttnKeys) + sizeof(int32_t) * static_cast<uint64_t>(p.itopk);  // a token's keys, its top-k
  // the indexer's scores (a chunk of tokens) and top-k order over a CSA layer's visible entries
  // (at most n_ctx / 4), its f32 key block.
  const uint64_t per_ctx = (sizeof(float) + sizeof(int32_t)) * static_cast<uint64_t>(n_ctx / 4 + 1) +
                           sizeof(float) * static_cast<uint64_t>(kIdxScores + kIdxKeys * p.ihd);
  // the attention op's own scratch on the layer that carves the most (rewound after each layer)
  const KvTypes t = ds4_kv_types_resolved(types);
  const GgmlType rows = kv_storage_type(t.k);
  const bool rotated = t.rotate && kv_type_quantized(t.k);
  uint64_t attn = 0;
  for (int il = 0; il < p.n_layer && p.n_swa > 0; ++il) {
    const int r = il < static_cast<int>(p.ratios.size()) ? p.ratios[il] : 0;
    attn = std::max(attn, sparse_attention_scratch_bytes(n_batch, p.head_dim, p.n_head, p.n_swa, r,
                                                         r == 4 ? p.itopk : 0, n_ctx, rows, rotated));
  }
  return Arena::capacity_for(per_tok * static_cast<uint64_t>(n_batch) + per_ctx + attn + (uint64_t{1} << 20));
}

Ds4State::Ds4State(const Ds4Params& p, int n_ctx_, int n_batch_, const Ds4State* share_scratch,
                   const KvTypes& types_)
    : kv(ds4_kv_spec(p, types_), n_ctx_, n_batch_, types_.rotate),
      layers(static_cast<size_t>(p.n_layer)),
      n_ctx(n_ctx_),
      n_batch(n_batch_),
      types(types_) {
  for (int il = 0; il < p.n_layer; ++il) {
    KvLayer& kl = kv.layer(il);
    Ds4LayerState& ls = layers[il];
    ls.window = kl.find(KvPartKind::window);
    ls.comp = kl.find(KvPartKind::compressed);
    ls.index = kl.find(KvPartKind::indexer);
    // the indexer keys are rotated by the model itself (llama.cpp's indexer Hadamard, any type)
    if (ls.index >= 0) kl.part(ls.index).set_hadamard(false);
    const int r = p.ratios[il];
    if (r == 0) continue;
    ls.comp_state.init(comp_shape(r, p.head_dim), &kl.part(kl.find(r == 4 ? "csa_state" : "hca_state")));
    if (r == 4) ls.index_state.init(comp_shape(4, p.ihd), &kl.part(kl.find("indexer_state")));
  }
  hb = hadamard_block(p.ihd);
  if (hb > 0) hadamard = hadamard_matrix(hb);
  if (share_scratch) {
    scratch = share_scratch->scratch;
  } else {
    scratch = std::make_shared<Arena>(ds4_arena_bytes(p, n_batch, n_ctx_, types_));
    owns_scratch = true;
  }
}

Status Ds4State::caches_on(Device& dev) {
  for (int il = 0; il < kv.n_layer(); ++il) {
    KvLayer& kl = kv.layer(il);
    for (int i : {layers[il].window, layers[il].comp}) {
      if (i < 0) continue;
      const RowCache& host = kl.part(i);
      const std::string what = "deepseek4 layer " + std::to_string(il) + " " + kl.parts()[i].name;
      STRATA_ASSIGN(RowCache rows,
                    RowCache::on_device(dev, host.width(), host.capacity(), host.ring(), what, host.type()));
      rows.set_hadamard(host.view().hadamard);
      kl.part(i) = std::move(rows);
    }
  }
  return {};
}

void Ds4State::reset() {
  for (auto& l : layers) {
    if (l.comp >= 0) l.comp_state.reset();
    if (l.index >= 0) l.index_state.reset();
  }
}

ArchMemory Ds4State::memory() const {
  return {kv.bytes(), owns_scratch ? scratch->capacity() : 0, types};
}

Status ds4_forward(const Ds4Params& p, const Ds4Weights& w, const Ds4DeviceWeights& dw, const Batch& b,
                   float* logits, ThreadPool& pool) {
  const int64_t n = b.n();
  if (b.runs.empty()) return err("deepseek4: a batch without sequences");
  if (!dw.dev) return err("deepseek4: not placed on a device (Architecture::place)");
  Ds4State& st = static_cast<Ds4State&>(*b.runs[0].state);  // lends the step its scratch
  if (n < 1 || n > st.n_batch)
    return err("deepseek4: batch of %lld tokens (n_batch %d)", (long long)n, st.n_batch);
  for (const SeqRun& r : b.runs) {
    const auto& rs = static_cast<const Ds4State&>(*r.state);
    if (r.pos0 + r.n > rs.n_ctx)
      return err("deepseek4: positions up to %lld exceed n_ctx %d", (long long)(r.pos0 + r.n), rs.n_ctx);
  }
  st.scratch->reset();
  Ctx c{p, w, dw, st, *st.scratch, pool, b.tokens, 0, n, {}};
  const ExpertStepScope step(st.experts, n);
  const int64_t d = p.n_embd, hc = p.hc;
  if (float* ms = c.alloc<float>(n); b.expert_min_shares(ms)) c.min_share = ms;
  float* H = c.alloc<float>(n * hc * d);  // [n][hc][d] residual streams
  for (int64_t t = 0; t < n; ++t) {
    float* Ht = H + t * hc * d;
    embedding_row(*w.token_embd, b.tokens[t], Ht);
    for (int64_t s = 1; s < hc; ++s) std::memcpy(Ht + s * d, Ht, sizeof(float) * d);
  }
  for (int il = 0; il < p.n_layer; ++il) {
    const Ds4Layer& l = w.layers[il];
    // Attention per sequence (its window ring, compressors and indexer), everything else batched.
    hc_site(c, l.hc_attn, l.attn_norm, H, [&](const float* x, float* y) {
      for (const SeqRun& r : b.runs) {
        Ctx rc{p,
               w,
               dw,
               static_cast<Ds4State&>(*r.state),
               *st.scratch,
               pool,
               b.tokens.subspan(static_cast<size_t>(r.t0), static_cast<size_t>(r.n)),
               r.pos0,
               r.n,
               {}};
        rc.itopk = r.knobs.index_topk(p.itopk);  // this sequence's own: never its neighbours'
        if (c.status.ok()) attention_block(rc, il, x + r.t0 * d, y + r.t0 * d);
        if (!rc.status.ok()) c.status = rc.status;
      }
    });
    hc_site(c, l.hc_ffn, l.ffn_norm, H, [&](const float* x, float* y) { ffn_block(c, il, x, y); });
    if (!c.status.ok()) return c.status;
  }
  // final collapse of the wanted rows' streams, norm, LM head
  const int64_t nout = static_cast<int64_t>(b.out_rows.size());
  if (nout == 0) return {};
  float* h = c.alloc<float>(nout * d);
  float mixes[64], pw[64];
  for (int64_t k = 0; k < nout; ++k) {
    const float* Ht = H + b.out_rows[k] * hc * d;
    hc_mixes(Ht, p.hc, d, w.head_fn, p.hc, p.eps, mixes);
    hc_head_weights(mixes, w.head_scale, w.head_base, p.hc, p.hc_eps, pw);
    float* ht = h + k * d;
    hc_collapse(Ht, pw, p.hc, d, ht);
    rms_norm(ht, w.output_norm, d, p.eps, ht);
  }
  c.lin(dw.output, h, nout, logits);
  return c.status;
}

}  // namespace strata::ds4
