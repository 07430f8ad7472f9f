// deepseek4 (DeepSeek-V4): 4 hyper-connection streams per token (mHC), attention with one
// shared K=V vector per token over a sliding window plus compressed entries (CSA ratio 4 with a
// lightning indexer, HCA ratio 128), grouped low-rank output, sqrt-softplus MoE with hash-routed
// first layers and clamped SwiGLU (deepseek-v4.md §2; fixtures README §7). The blocks live in
// model/ds4_*.{h,cpp}; this file binds them to the Architecture interface.
#include <memory>

#include "model/deepseek4/ds4_arch.h"
#include "model/deepseek4/ds4_forward.h"
#include "model/deepseek4/ds4_hparams.h"
#include "model/deepseek4/ds4_weights.h"

namespace strata {

namespace {

class Deepseek4 : public Architecture {
 public:
  Deepseek4(HParams hp, ds4::Ds4Params p, ds4::Ds4Weights w)
      : hp_(std::move(hp)), p_(std::move(p)), w_(std::move(w)) {}

  const HParams& hparams() const override { return hp_; }
  KvSpec kv_spec() const override { return ds4::ds4_kv_spec(p_); }
  Result<KvSpec> kv_spec_for(const KvTypes& types) const override {
    STRATA_ASSIGN(const KvTypes t, ds4::ds4_kv_types(p_, types));
    return ds4::ds4_kv_spec(p_, t);
  }

  Result<std::unique_ptr<ArchState>> new_state(const StateOptions& opts) const override {
    if (opts.n_ctx < 1 || opts.n_batch < 1) return err("deepseek4: n_ctx and n_batch must be >= 1");
    STRATA_ASSIGN(const KvTypes kvt, ds4::ds4_kv_types(p_, opts.kv));
    // share_scratch: checked by Model::new_session (same model, n_ctx and n_batch)
    const auto* share = static_cast<const ds4::Ds4State*>(opts.share_scratch);
    STRATA_ASSERT(!share || (share->n_ctx == opts.n_ctx && share->n_batch == opts.n_batch));
    // the window and compressed rows on the device the layers run on (Model::load placed them)
    if (!dev_w_.dev) return err("deepseek4: not placed on a device (Architecture::place)");
    if (opts.device && opts.device != dev_w_.dev)
      return err("deepseek4: a state's caches must live on the device its layers run on (%s)",
                 dev_w_.dev->name().c_str());
    auto st = std::make_unique<ds4::Ds4State>(p_, opts.n_ctx, opts.n_batch, share, kvt);
    STRATA_TRY(st->caches_on(*dev_w_.dev));
    st->experts = opts.experts;
    return std::unique_ptr<ArchState>(std::move(st));
  }

  // Imports the dense projections (every linear of the forward but the experts') and the sinks:
  // the forward runs them and the attention core through the device, where the states keep their
  // window and compressed rows; the indexer, compressors' state and the rest stay on the host.
  Status place(Device& dev) override {
    STRATA_TRY(dw_.bind(dev, hp_.arch));
    return ds4::ds4_place_weights(p_, w_, dw_, &dev_w_);
  }

  Status forward(const Batch& b, float* logits, ThreadPool& pool) const override {
    return ds4::ds4_forward(p_, w_, dev_w_, b, logits, pool);
  }

 private:
  HParams hp_;
  ds4::Ds4Params p_;
  ds4::Ds4Weights w_;
  DeviceWeights dw_;
  ds4::Ds4DeviceWeights dev_w_;
};

// The generic HParams the rest of strata reads (n_vocab, n_ctx_train, per-layer attention kind).
HParams generic_hparams(const ds4::Ds4Params& p) {
  HParams hp;
  hp.arch = "deepseek4";
  hp.n_layer = p.n_layer;
  hp.n_embd = p.n_embd;
  hp.n_head = p.n_head;
  hp.n_head_kv = 1;
  hp.head_dim_k = hp.head_dim_v = p.head_dim;
  hp.n_vocab = p.n_vocab;
  hp.n_ctx_train = static_cast<int>(std::min<int64_t>(p.n_ctx_train, int64_t{1} << 30));
  hp.rms_eps = p.eps;
  hp.rope_style = RopeStyle::rope_style_norm;
  hp.rope.n_rot = p.n_rot;
  hp.rope.freq_base = p.rope_base;
  hp.n_expert = p.n_expert;
  hp.n_expert_used = p.n_used;
  hp.n_ff_exp = p.n_ff_exp;
  hp.n_ff_shexp = p.n_ff_exp * p.n_shared;
  hp.sliding_window = p.n_swa;
  hp.layers.resize(static_cast<size_t>(p.n_layer));
  for (int il = 0; il < p.n_layer; ++il) {
    LayerParams& l = hp.layers[il];
    l.n_head = p.n_head;
    l.n_head_kv = 1;
    l.window = p.n_swa;
    l.compress_ratio = p.ratios[il];
    l.n_ff_exp = p.n_ff_exp;
    l.attn_kind = p.ratios[il] == 4     ? AttnKind::attn_kind_csa
                  : p.ratios[il] == 128 ? AttnKind::attn_kind_hca
                                        : AttnKind::attn_kind_sliding;
  }
  return hp;
}

}  // namespace

Result<KvSpec> kv_spec_deepseek4(const GgufFile& f) {
  STRATA_ASSIGN(ds4::Ds4Params p, ds4::ds4_params_read(f));
  return ds4::ds4_kv_spec(p);
}

Result<std::unique_ptr<Architecture>> make_arch_deepseek4(const GgufFile& f) {
  STRATA_ASSIGN(ds4::Ds4Params p, ds4::ds4_params_read(f));
  STRATA_ASSIGN(ds4::Ds4Weights w, ds4::ds4_bind_weights(f, p));
  HParams hp = generic_hparams(p);
  return std::unique_ptr<Architecture>(new Deepseek4(std::move(hp), std::move(p), std::move(w)));
}

}  // namespace strata
