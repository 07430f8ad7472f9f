#include "model/deepseek4/ds4_weights.h"

namespace strata::ds4 {

namespace {

Status bind_site(const WeightBinder& b, int il, const char* which, int64_t hcd, int64_t n_mix, Ds4HcSite* s) {
  const std::string p = std::string("hc_") + which + "_";
  STRATA_ASSIGN(s->fn, b.f32(blk_name(il, (p + "fn.weight").c_str()), {hcd, n_mix}));
  STRATA_ASSIGN(s->base, b.f32(blk_name(il, (p + "base.weight").c_str()), {n_mix}));
  STRATA_ASSIGN(s->scale, b.f32(blk_name(il, (p + "scale.weight").c_str()), {3}));
  return {};
}

Status bind_comp(const WeightBinder& b, int il, const char* prefix, int64_t d, int64_t cw, int64_t width,
                 int64_t ratio, Ds4Compressor* c) {
  const std::string p = prefix;
  STRATA_ASSIGN(c->wkv, b.matrix(blk_name(il, (p + "_kv.weight").c_str()), {d, cw}));
  STRATA_ASSIGN(c->wgate, b.matrix(blk_name(il, (p + "_gate.weight").c_str()), {d, cw}));
  STRATA_ASSIGN(c->ape, b.f32(blk_name(il, (p + "_ape.weight").c_str()), {cw, ratio}));
  STRATA_ASSIGN(c->norm, b.f32(blk_name(il, (p + "_norm.weight").c_str()), {width}));
  return {};
}

}  // namespace

Result<Ds4Weights> ds4_bind_weights(const GgufFile& f, Ds4Params& p) {
  const WeightBinder b(f);
  Ds4Weights w;
  const int64_t d = p.n_embd, hd = p.head_dim, hcd = int64_t{p.hc} * d, n_mix = p.n_mix();
  const TensorView* te = b.find("token_embd.weight");
  if (!te) return err("tensor 'token_embd.weight': missing");
  p.n_vocab = static_cast<int>(te->ne[1]);
  const int64_t V = p.n_vocab;
  STRATA_ASSIGN(w.token_embd, b.require("token_embd.weight", {d, V}, types_embedding()));
  STRATA_ASSIGN(w.output_norm, b.f32("output_norm.weight", {d}));
  STRATA_ASSIGN(w.output, b.matrix("output.weight", {d, V}));
  STRATA_ASSIGN(w.head_fn, b.f32("output_hc_fn.weight", {hcd, p.hc}));
  STRATA_ASSIGN(w.head_base, b.f32("output_hc_base.weight", {p.hc}));
  STRATA_ASSIGN(w.head_scale, b.f32("output_hc_scale.weight", {1}));
  const int64_t E = p.n_expert, F = p.n_ff_exp, Fs = int64_t{p.n_ff_exp} * p.n_shared;
  if (p.n_shared < 1)
    return err("metadata key 'deepseek4.expert_shared_count' = 0: a shared expert is required");
  w.layers.resize(static_cast<size_t>(p.n_layer));
  for (int il = 0; il < p.n_layer; ++il) {
    Ds4Layer& l = w.layers[il];
    STRATA_TRY(bind_site(b, il, "attn", hcd, n_mix, &l.hc_attn));
    STRATA_TRY(bind_site(b, il, "ffn", hcd, n_mix, &l.hc_ffn));
    STRATA_ASSIGN(l.attn_norm, b.f32(blk_name(il, "attn_norm.weight"), {d}));
    STRATA_ASSIGN(l.attn_sinks, b.f32(blk_name(il, "attn_sinks.weight"), {p.n_head}));
    STRATA_ASSIGN(l.wq_a, b.matrix(blk_name(il, "attn_q_a.weight"), {d, p.q_lora}));
    STRATA_ASSIGN(l.q_a_norm, b.f32(blk_name(il, "attn_q_a_norm.weight"), {p.q_lora}));
    STRATA_ASSIGN(l.wq_b, b.matrix(blk_name(il, "attn_q_b.weight"), {p.q_lora, int64_t{p.n_head} * hd}));
    STRATA_ASSIGN(l.wkv, b.matrix(blk_name(il, "attn_kv.weight"), {d, hd}));
    STRATA_ASSIGN(l.kv_norm, b.f32(blk_name(il, "attn_kv_a_norm.weight"), {hd}));
    const int64_t gin = int64_t{p.n_head} * hd / p.o_groups;
    STRATA_ASSIGN(l.wo_a,
                  b.matrix(blk_name(il, "attn_output_a.weight"), {gin, int64_t{p.o_groups} * p.o_lora}));
    STRATA_ASSIGN(l.wo_b,
                  b.matrix(blk_name(il, "attn_output_b.weight"), {int64_t{p.o_groups} * p.o_lora, d}));
    const int r = p.ratios[il];
    if (r != 0) {
      const int64_t coff = r == 4 ? 2 : 1;
      STRATA_TRY(bind_comp(b, il, "attn_compressor", d, coff * hd, hd, r, &l.comp));
    }
    if (r == 4) {
      STRATA_ASSIGN(l.idx_proj, b.matrix(blk_name(il, "indexer.proj.weight"), {d, p.ih}));
      STRATA_ASSIGN(l.idx_q_b,
                    b.matrix(blk_name(il, "indexer.attn_q_b.weight"), {p.q_lora, int64_t{p.ih} * p.ihd}));
      STRATA_TRY(bind_comp(b, il, "indexer_compressor", d, 2 * int64_t{p.ihd}, p.ihd, 4, &l.idx_comp));
    }
    STRATA_ASSIGN(l.ffn_norm, b.f32(blk_name(il, "ffn_norm.weight"), {d}));
    STRATA_ASSIGN(l.gate_inp, b.require(blk_name(il, kRouterWeight), {d, E}, types_f32()));
    if (il < p.n_hash) {
      STRATA_ASSIGN(const TensorView* t, b.require(blk_name(il, "ffn_gate_tid2eid.weight"), {p.n_used, V},
                                                   TypeSet{GgmlType::i32}));
      l.tid2eid = static_cast<const int32_t*>(t->data);
      for (int64_t i = 0; i < int64_t{p.n_used} * V; ++i)
        if (l.tid2eid[i] < 0 || l.tid2eid[i] >= E)
          return err("tensor '%s': expert id %d at token %lld is out of range [0, %lld)", t->name.c_str(),
                     l.tid2eid[i], (long long)(i / p.n_used), (long long)E);
    } else {
      STRATA_ASSIGN(l.probs_b, b.f32(blk_name(il, "exp_probs_b.bias"), {E}));
    }
    MoeWeights& mw = l.moe_w;
    STRATA_ASSIGN(mw.gate_exps,
                  b.matrix(blk_name(il, kRoutedExpertPartNames[routed_expert_gate]), {d, F, E}));
    STRATA_ASSIGN(mw.up_exps, b.matrix(blk_name(il, kRoutedExpertPartNames[routed_expert_up]), {d, F, E}));
    STRATA_ASSIGN(mw.down_exps,
                  b.matrix(blk_name(il, kRoutedExpertPartNames[routed_expert_down]), {F, d, E}));
    STRATA_ASSIGN(mw.gate_shexp, b.matrix(blk_name(il, "ffn_gate_shexp.weight"), {d, Fs}));
    STRATA_ASSIGN(mw.up_shexp, b.matrix(blk_name(il, "ffn_up_shexp.weight"), {d, Fs}));
    STRATA_ASSIGN(mw.down_shexp, b.matrix(blk_name(il, "ffn_down_shexp.weight"), {Fs, d}));
    MoeConfig& mc = l.moe_cfg;
    mc.n_embd = p.n_embd;
    mc.n_expert = p.n_expert;
    mc.n_used = p.n_used;
    mc.n_ff = p.n_ff_exp;
    mc.n_ff_shexp = static_cast<int>(Fs);
    mc.act = mc.shexp_act = ExpertAct::expert_act_swiglu_clamped;
    mc.clamp = p.clamp_exp[il];
    mc.shexp_clamp = p.clamp_shexp[il];
  }
  return w;
}

Status ds4_place_weights(const Ds4Params& p, const Ds4Weights& w, DeviceWeights& dw, Ds4DeviceWeights* out) {
  STRATA_ASSERT(dw.device() != nullptr);
  Ds4DeviceWeights d;
  d.dev = dw.device();
  d.layers.resize(w.layers.size());
  for (size_t il = 0; il < w.layers.size(); ++il) {
    const Ds4Layer& l = w.layers[il];
    Ds4DeviceLayer& dl = d.layers[il];
    STRATA_ASSIGN(dl.wq_a, dw.mat(*l.wq_a));
    STRATA_ASSIGN(dl.wq_b, dw.mat(*l.wq_b));
    STRATA_ASSIGN(dl.wkv, dw.mat(*l.wkv));
    STRATA_ASSIGN(dl.wo_b, dw.mat(*l.wo_b));
    STRATA_ASSIGN(dl.gate_inp, dw.mat(*l.gate_inp));
    STRATA_ASSIGN(dl.sinks, dw.vec(l.attn_sinks, p.n_head, "attn_sinks"));
    for (int64_t g = 0; g < p.o_groups; ++g) {
      STRATA_ASSIGN(DeviceMat m, dw.mat_rows(*l.wo_a, g * p.o_lora, p.o_lora));
      dl.wo_a.push_back(m);
    }
    if (l.comp.wkv) {
      STRATA_ASSIGN(dl.comp.wkv, dw.mat(*l.comp.wkv));
      STRATA_ASSIGN(dl.comp.wgate, dw.mat(*l.comp.wgate));
    }
    if (l.idx_comp.wkv) {
      STRATA_ASSIGN(dl.idx_comp.wkv, dw.mat(*l.idx_comp.wkv));
      STRATA_ASSIGN(dl.idx_comp.wgate, dw.mat(*l.idx_comp.wgate));
      STRATA_ASSIGN(dl.idx_proj, dw.mat(*l.idx_proj));
      STRATA_ASSIGN(dl.idx_q_b, dw.mat(*l.idx_q_b));
    }
  }
  STRATA_ASSIGN(d.output, dw.mat(*w.output));
  STRATA_TRY(dw.commit());
  *out = std::move(d);
  return {};
}

}  // namespace strata::ds4
