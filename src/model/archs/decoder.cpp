#include "model/archs/decoder.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "base/arena.h"
#include "base/units.h"
#include "kernels/device.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "kv/kv_cache.h"
#include "kv/kv_pool.h"
#include "model/blocks/device_weights.h"
#include "model/weights.h"

namespace strata {

namespace {

// The step scratch (decoder_scratch): owned by one state, borrowed by those sharing it.
struct DecoderStepScratch {
  Arena arena;
  AlignedPtr<float> x;              // [n_batch][n_embd] residual
  AlignedPtr<float> h;              // [n_batch][n_embd] normed block input
  AlignedPtr<float> y;              // [n_batch][n_embd] block output
  std::vector<DeviceAttnSeg> segs;  // the step's attention segments (one per sequence in it)
  uint64_t rows_bytes = 0;
};

class DecoderState final : public ArchState {
 public:
  // kv: the caches, on the device the attention runs on.
  DecoderState(KvCache kv_, const HParams& hp, const StateOptions& o)
      : kv(std::move(kv_)), kv_types(o.kv), n_ctx(o.n_ctx), n_batch(o.n_batch), experts(o.experts) {
    if (o.share_scratch) {  // checked by Model::new_session: same model, n_ctx and n_batch
      const auto& other = static_cast<const DecoderState&>(*o.share_scratch);
      STRATA_ASSERT(other.n_ctx == o.n_ctx && other.n_batch == o.n_batch);
      sc = other.sc;
      return;
    }
    const int64_t d = hp.n_embd, nb = o.n_batch;
    const DecoderScratch z = decoder_scratch(hp, nb, o.n_ctx, o.n_threads);
    sc = std::make_shared<DecoderStepScratch>();
    sc->arena = Arena(z.arena);
    sc->x = aligned_alloc_array<float>(nb * d);
    sc->h = aligned_alloc_array<float>(nb * d);
    sc->y = aligned_alloc_array<float>(nb * d);
    sc->segs.reserve(static_cast<size_t>(nb));
    sc->rows_bytes = z.rows;
    owns_scratch = true;
  }

  ArchMemory memory() const override {
    return {kv.bytes(), owns_scratch ? sc->arena.capacity() + sc->rows_bytes : 0, kv_types};
  }
  void reset() override { kv.release_blocks(); }
  BlockTable* kv_blocks() override { return kv.blocks(); }
  Status save_checkpoint(int64_t n_past) override { return kv.save_checkpoint(n_past); }
  Status restore_checkpoint(int64_t n) override { return kv.restore_checkpoint(n); }

  KvCache kv;
  KvTypes kv_types;
  int n_ctx;
  int n_batch;
  ExpertSource* experts;
  std::shared_ptr<DecoderStepScratch> sc;
  bool owns_scratch = false;
};

// A layer's weights on the device its ops run on (Decoder::place).
struct DeviceLayer {
  DeviceAttnWork attn;  // cfg and weights; the step's fields are filled per forward
  DeviceFfnWork ffn;    // dense FFN layers
};

class Decoder final : public Architecture {
 public:
  Decoder(HParams hp, DecoderWeights w) : hp_(std::move(hp)), w_(std::move(w)) {}
  const HParams& hparams() const override { return hp_; }
  KvSpec kv_spec() const override { return decoder_kv_spec(hp_); }
  bool paged_kv() const override { return true; }
  Result<KvSpec> kv_spec_for(const KvTypes& types) const override {
    STRATA_ASSIGN(const KvTypes t, kv_types_for(types));
    return decoder_kv_spec(hp_, t);
  }

  Result<std::unique_ptr<ArchState>> new_state(const StateOptions& o) const override {
    if (o.n_ctx < 1 || o.n_batch < 1) return err("session: n_ctx and n_batch must be >= 1");
    if (!dev_) return err("%s: not placed on a device (Architecture::place)", hp_.arch.c_str());
    if (o.device != dev_)
      return err("%s: a state's caches must live on the device its layers run on (%s)", hp_.arch.c_str(),
                 dev_->name().c_str());
    STRATA_ASSIGN(const KvTypes kvt, kv_types_for(o.kv));
    const KvSpec spec = decoder_kv_spec(hp_, kvt);
    if (o.kv_pool && &o.kv_pool->device() != dev_)
      return err("%s: the KV pool must live on the device its layers run on (%s)", hp_.arch.c_str(),
                 dev_->name().c_str());
    const DeviceMemory dm = dev_->memory();
    const uint64_t kv_bytes = o.kv_pool ? 0 : spec.bytes(o.n_ctx, o.n_batch);
    if (dev_->kind() == DeviceKind::device_gpu && dm.budget > 0 && dm.allocated + kv_bytes > dm.budget)
      return err("%s: a session's KV caches (context %d) need %s on %s: %s of its %s budget in use",
                 hp_.arch.c_str(), o.n_ctx, format_bytes(kv_bytes).c_str(), dev_->name().c_str(),
                 format_bytes(dm.allocated).c_str(), format_bytes(dm.budget).c_str());
    STRATA_ASSIGN(KvCache kv, o.kv_pool ? KvCache::paged(spec, o.n_ctx, o.n_batch, *o.kv_pool, kvt.rotate)
                                        : KvCache::on_device(spec, o.n_ctx, o.n_batch, *dev_, kvt.rotate));
    for (int il = 0; il < kv.n_layer(); ++il)  // forward reads parts 0 / 1 as K / V
      STRATA_ASSERT(kv.layer(il).find("k") == 0 && kv.layer(il).find("v") == 1);
    auto st = std::make_unique<DecoderState>(std::move(kv), hp_, o);
    st->kv_types = kvt;  // what the caches hold (a default may have fallen back to f32)
    return std::unique_ptr<ArchState>(std::move(st));
  }

  // Imports every dense weight the device ops read (the mmapped bytes; a host-visible device
  // uses them in place). Routed experts stay with the MoE loop and the expert store.
  Status place(Device& dev) override {
    STRATA_TRY(dw_.bind(dev, hp_.arch));
    dev_ = &dev;
    layers_.resize(w_.layers.size());
    for (size_t il = 0; il < w_.layers.size(); ++il) {
      const DecoderLayer& l = w_.layers[il];
      DeviceAttnWork& a = layers_[il].attn;
      const AttnConfig& c = l.attn;
      a.layer = static_cast<int>(il);
      a.cfg = c;
      const int64_t q_w = int64_t{c.n_head} * c.head_dim_k, k_w = int64_t{c.n_head_kv} * c.head_dim_k,
                    v_w = int64_t{c.n_head_kv} * c.head_dim_v;
      STRATA_ASSIGN(a.wq, dw_.mat(*l.attn_w.wq));
      STRATA_ASSIGN(a.wk, dw_.mat(*l.attn_w.wk));
      STRATA_ASSIGN(a.wv, dw_.mat(*l.attn_w.wv));
      STRATA_ASSIGN(a.wo, dw_.mat(*l.attn_w.wo));
      STRATA_ASSIGN(a.bq, dw_.vec(l.attn_w.bq, q_w, blk_name(int(il), "attn_q.bias")));
      STRATA_ASSIGN(a.bk, dw_.vec(l.attn_w.bk, k_w, blk_name(int(il), "attn_k.bias")));
      STRATA_ASSIGN(a.bv, dw_.vec(l.attn_w.bv, v_w, blk_name(int(il), "attn_v.bias")));
      STRATA_ASSIGN(a.bo, dw_.vec(l.attn_w.bo, hp_.n_embd, blk_name(int(il), "attn_output.bias")));
      STRATA_ASSIGN(a.q_norm, dw_.vec(l.attn_w.q_norm, c.head_dim_k, blk_name(int(il), "attn_q_norm")));
      STRATA_ASSIGN(a.k_norm, dw_.vec(l.attn_w.k_norm, c.head_dim_k, blk_name(int(il), "attn_k_norm")));
      STRATA_ASSIGN(a.sinks, dw_.vec(l.attn_w.sinks, c.n_head, blk_name(int(il), "attn_sinks")));
      if (!l.moe) {
        DeviceFfnWork& f = layers_[il].ffn;
        f.layer = static_cast<int>(il);
        STRATA_ASSIGN(f.gate, dw_.mat(*l.ffn_gate));
        STRATA_ASSIGN(f.up, dw_.mat(*l.ffn_up));
        STRATA_ASSIGN(f.down, dw_.mat(*l.ffn_down));
      }
    }
    STRATA_ASSIGN(output_, dw_.mat(*w_.output));
    return dw_.commit();
  }

  // Every run's rows go through the projections, norms and MoE together; attention keeps each run
  // with its own cache and positions (one AttnSegment per run). The first run's state lends its
  // scratch to the step, so nothing allocates here.
  Status forward(const Batch& b, float* logits, ThreadPool& pool) const override {
    const int64_t n = b.n(), d = hp_.n_embd;
    STRATA_ASSERT(!b.runs.empty());
    auto& st = static_cast<DecoderState&>(*b.runs[0].state);
    STRATA_ASSERT(n >= 1 && n <= st.n_batch);
    for (const SeqRun& r : b.runs) {
      const auto& rs = static_cast<const DecoderState&>(*r.state);
      STRATA_ASSERT(r.n >= 1 && r.pos0 >= 0 && r.pos0 + r.n <= rs.n_ctx);
    }
    STRATA_ASSERT(dev_ != nullptr);  // new_state made the states
    DecoderStepScratch& sc = *st.sc;
    // An op submitted to the device, waited for: the host reads its output next.
    auto run_on = [&](Result<DeviceTicket> t) -> Status {
      if (!t.ok()) return t.status();
      return dev_->wait(t.value());
    };
    float* x = sc.x.get();
    float* h = sc.h.get();
    float* y = sc.y.get();
    sc.arena.reset();
    const ExpertStepScope step(st.experts, n);
    for (int64_t t = 0; t < n; ++t) embedding_row(*w_.token_embd, b.tokens[t], x + t * d);

    for (int il = 0; il < hp_.n_layer; ++il) {
      const DecoderLayer& l = w_.layers[il];
      for (int64_t t = 0; t < n; ++t) rms_norm(x + t * d, l.attn_norm, h + t * d, d, hp_.rms_eps);
      sc.segs.clear();
      for (const SeqRun& r : b.runs) {
        const KvLayer& kv = static_cast<DecoderState&>(*r.state).kv.layer(il);
        sc.segs.push_back(
            DeviceAttnSeg{kv.part(0).device_rows(), kv.part(1).device_rows(), r.pos0, r.t0, r.n});
      }
      DeviceAttnWork aw = layers_[il].attn;
      aw.segs = sc.segs.data();
      aw.n_seg = static_cast<int>(sc.segs.size());
      aw.x = h;
      aw.n = n;
      aw.out = y;
      aw.host_scratch = &sc.arena;
      STRATA_TRY(run_on(dev_->run_attention(aw)));
      vec_add(x, y, n * d);

      for (int64_t t = 0; t < n; ++t) rms_norm(x + t * d, l.ffn_norm, h + t * d, d, hp_.rms_eps);
      if (l.moe) {
        float* min_w = sc.arena.alloc<float>(n);
        STRATA_TRY(moe_forward(l.moe_cfg, l.moe_w, h, n, y, pool, sc.arena, st.experts, il,
                               b.expert_min_shares(min_w) ? min_w : nullptr));
      } else {
        DeviceFfnWork fw = layers_[il].ffn;
        fw.x = h;
        fw.n = n;
        fw.y = y;
        fw.host_scratch = &sc.arena;
        STRATA_TRY(run_on(dev_->run_ffn(fw)));
      }
      vec_add(x, y, n * d);
      sc.arena.reset();
    }

    // The wanted rows, gathered: h row k for out_rows[k].
    const int64_t n_out = static_cast<int64_t>(b.out_rows.size());
    for (int64_t k = 0; k < n_out; ++k)
      rms_norm(x + b.out_rows[k] * d, w_.output_norm, h + k * d, d, hp_.rms_eps);
    if (n_out > 0) {
      DeviceLinearWork lw;
      lw.w = output_;
      lw.x = h;
      lw.n = n_out;
      lw.y = logits;
      lw.host_scratch = &sc.arena;
      STRATA_TRY(run_on(dev_->run_linear(lw)));
    }
    return {};
  }

 private:
  // The types a state holds: what was asked, where the device's attention reads such rows; a
  // tool's default it cannot read falls back to f32, a type asked for is an error naming the device.
  // Every part must hold whole blocks of its type (kv_spec_check).
  Result<KvTypes> kv_types_for(const KvTypes& asked) const {
    KvTypes kvt = asked;
    if (dev_)
      for (KvType t : {kvt.k, kvt.v}) {
        if (dev_->attention_rows_supported(kv_storage_type(t), kvt.rotate && kv_type_quantized(t))) continue;
        if (!kvt.is_default)
          return err("%s: KV type %s is not supported on %s (use -ctk f32 -ctv f32)", hp_.arch.c_str(),
                     kv_type_name(t), dev_->name().c_str());
        kvt.k = kvt.v = KvType::f32;
      }
    STRATA_TRY(kv_spec_check(decoder_kv_spec(hp_, kvt), hp_.arch.c_str(), decoder_head_width(hp_)));
    return kvt;
  }

  HParams hp_;
  DecoderWeights w_;
  Device* dev_ = nullptr;
  std::vector<DeviceLayer> layers_;
  DeviceMat output_;
  DeviceWeights dw_;
};

}  // namespace

Result<std::unique_ptr<Architecture>> make_decoder(HParams hp, DecoderWeights w) {
  STRATA_TRY(hparams_validate(hp));
  return std::unique_ptr<Architecture>(new Decoder(std::move(hp), std::move(w)));
}

KvSpec decoder_kv_spec(const HParams& hp, const KvTypes& types) {
  KvSpec s;
  for (int il = 0; il < hp.n_layer; ++il) {
    const AttnConfig a = attn_config_from(hp, il);
    s.layers.push_back(kv_layer_attention(a.n_head_kv, a.head_dim_k, a.head_dim_v, a.window));
  }
  return kv_spec_typed(std::move(s), types);
}

int64_t decoder_head_width(const HParams& hp) {
  int64_t g = 0;  // the heads' common divisor: every head slice must hold whole blocks
  for (int il = 0; il < hp.n_layer; ++il) {
    const AttnConfig a = attn_config_from(hp, il);
    g = std::gcd(g, std::gcd(int64_t{a.head_dim_k}, int64_t{a.head_dim_v}));
  }
  return g;
}

DecoderScratch decoder_scratch(const HParams& hp, int64_t nb, int64_t n_ctx, int n_threads) {
  const int64_t d = hp.n_embd;
  int64_t per_tok = 0, max_in = d;
  const bool moe = hp.is_moe();
  for (int il = 0; il < hp.n_layer; ++il) {
    const AttnConfig a = attn_config_from(hp, il);
    // q, o, k, v rows and the RoPE table (n_rot <= head_dim_k).
    const int64_t attn = int64_t{a.n_head} * (a.head_dim_k + a.head_dim_v) +
                         int64_t{a.n_head_kv} * (a.head_dim_k + a.head_dim_v) + a.head_dim_k;
    const int64_t F = moe ? hp.layers[il].n_ff_exp : 0, Fs = moe ? hp.n_ff_shexp : 0;
    // MoE: router logits, the slots' ids / weights / offsets, the weighted outputs [K][d], the
    // shared expert's rows; dense: gate and up rows.
    const int64_t ffn = moe ? hp.n_expert + 3 * int64_t{hp.n_expert_used} + int64_t{hp.n_expert_used} * d +
                                  2 * d + 2 * F + 2 * Fs + d
                            : 2 * int64_t{hp.n_ff};
    per_tok = std::max(per_tok, std::max(attn, ffn));
    max_in = std::max({max_in, int64_t{a.n_head} * a.head_dim_v, F, Fs});
  }
  DecoderScratch s;
  s.arena =
      Arena::capacity_for(sizeof(float) * static_cast<uint64_t>(nb * per_tok + int64_t{n_threads} * n_ctx) +
                          4 * static_cast<uint64_t>(nb * max_in) * sizeof(float) + (uint64_t{1} << 16));
  s.rows = 3 * sizeof(float) * static_cast<uint64_t>(nb * d);
  return s;
}

AttnConfig attn_config_from(const HParams& hp, int il) {
  const LayerParams& lp = hp.layers[il];
  AttnConfig c;
  c.n_embd = hp.n_embd;
  c.n_head = lp.n_head;
  c.n_head_kv = lp.n_head_kv;
  c.head_dim_k = hp.head_dim_k;
  c.head_dim_v = hp.head_dim_v;
  c.rope_style = hp.rope_style;
  c.rope = hp.rope;
  c.window = lp.attn_kind == AttnKind::attn_kind_sliding ? lp.window : 0;
  c.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  c.eps = hp.rms_eps;
  return c;
}

Status bind_decoder_io(const WeightBinder& b, HParams& hp, DecoderWeights& w) {
  const TensorView* te = b.find("token_embd.weight");
  if (!te) return err("tensor 'token_embd.weight': missing");
  const int64_t n_vocab = te->ne[1];
  if (hp.n_vocab != 0 && hp.n_vocab != n_vocab)
    return err("tensor 'token_embd.weight': %lld rows but %s.vocab_size = %d",
               static_cast<long long>(n_vocab), hp.arch.c_str(), hp.n_vocab);
  if (n_vocab < 1 || n_vocab > (int64_t{1} << 30)) return err("tensor 'token_embd.weight': bad vocab size");
  hp.n_vocab = static_cast<int>(n_vocab);
  STRATA_ASSIGN(w.token_embd, b.require("token_embd.weight", {hp.n_embd, n_vocab}, types_embedding()));
  STRATA_ASSIGN(const TensorView* on, b.require("output_norm.weight", {hp.n_embd}, types_f32()));
  w.output_norm = static_cast<const float*>(on->data);
  STRATA_ASSIGN(w.output, b.optional("output.weight", {hp.n_embd, n_vocab}, types_matmul()));
  if (!w.output) {
    if (!types_matmul().has(w.token_embd->type))
      return err("tensor 'token_embd.weight': type %s cannot serve as the tied output",
                 type_name(w.token_embd->type));
    w.output = w.token_embd;
  }
  w.layers.resize(hp.n_layer);
  return {};
}

Status bind_attention(const WeightBinder& b, const HParams& hp, int il, bool biases, DecoderLayer& l) {
  l.attn = attn_config_from(hp, il);
  const AttnConfig& c = l.attn;
  const int64_t q_w = int64_t{c.n_head} * c.head_dim_k, k_w = int64_t{c.n_head_kv} * c.head_dim_k,
                v_w = int64_t{c.n_head_kv} * c.head_dim_v, o_w = int64_t{c.n_head} * c.head_dim_v;
  STRATA_ASSIGN(l.attn_norm, b.f32(blk_name(il, "attn_norm.weight"), {hp.n_embd}));
  AttnWeights& w = l.attn_w;
  STRATA_ASSIGN(w.wq, b.matrix(blk_name(il, "attn_q.weight"), {hp.n_embd, q_w}));
  STRATA_ASSIGN(w.wk, b.matrix(blk_name(il, "attn_k.weight"), {hp.n_embd, k_w}));
  STRATA_ASSIGN(w.wv, b.matrix(blk_name(il, "attn_v.weight"), {hp.n_embd, v_w}));
  STRATA_ASSIGN(w.wo, b.matrix(blk_name(il, "attn_output.weight"), {o_w, hp.n_embd}));
  STRATA_ASSIGN(w.bq, b.f32(blk_name(il, "attn_q.bias"), {q_w}, biases));
  STRATA_ASSIGN(w.bk, b.f32(blk_name(il, "attn_k.bias"), {k_w}, biases));
  STRATA_ASSIGN(w.bv, b.f32(blk_name(il, "attn_v.bias"), {v_w}, biases));
  STRATA_ASSIGN(w.bo, b.f32(blk_name(il, "attn_output.bias"), {hp.n_embd}, false));
  return {};
}

Status bind_moe(const WeightBinder& b, const HParams& hp, int il, const char* norm_name, DecoderLayer& l) {
  const int64_t d = hp.n_embd, E = hp.n_expert, F = hp.layers[il].n_ff_exp;
  STRATA_ASSIGN(l.ffn_norm, b.f32(blk_name(il, norm_name), {d}));
  l.moe = true;
  MoeConfig& c = l.moe_cfg;
  c.n_embd = hp.n_embd;
  c.n_expert = hp.n_expert;
  c.n_used = hp.n_expert_used;
  c.n_ff = static_cast<int>(F);
  MoeWeights& w = l.moe_w;
  STRATA_ASSIGN(w.gate_inp, b.matrix(blk_name(il, kRouterWeight), {d, E}));
  STRATA_ASSIGN(w.gate_exps, b.matrix(blk_name(il, kRoutedExpertPartNames[routed_expert_gate]), {d, F, E}));
  STRATA_ASSIGN(w.up_exps, b.matrix(blk_name(il, kRoutedExpertPartNames[routed_expert_up]), {d, F, E}));
  STRATA_ASSIGN(w.down_exps, b.matrix(blk_name(il, kRoutedExpertPartNames[routed_expert_down]), {F, d, E}));
  return {};
}

}  // namespace strata
