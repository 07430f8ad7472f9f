// qwen2moe (Qwen1.5/2-MoE): pre-norm decoder; q/k/v biases (added before RoPE), NEOX RoPE over
// the full head; MoE with softmax → top-k and *unnormalised* weights, plus a shared expert
// scaled by sigmoid(ffn_gate_inp_shexp · h).
#include "model/arch.h"
#include "model/archs/decoder.h"
#include "model/weights.h"

namespace strata {

namespace {

Result<HParams> qwen2moe_hparams(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, hparams_read_common(f));
  hp.rope_style = RopeStyle::rope_style_neox;
  if (hp.n_expert == 0) return err("qwen2moe: qwen2moe.expert_count missing or 0");
  STRATA_TRY(hparams_validate(hp));
  return hp;
}

}  // namespace

Result<KvSpec> kv_spec_qwen2moe(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, qwen2moe_hparams(f));
  return decoder_kv_spec(hp);
}

Result<std::unique_ptr<Architecture>> make_arch_qwen2moe(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, qwen2moe_hparams(f));

  WeightBinder b(f);
  DecoderWeights w;
  STRATA_TRY(bind_decoder_io(b, hp, w));
  const int64_t d = hp.n_embd;
  for (int il = 0; il < hp.n_layer; ++il) {
    DecoderLayer& l = w.layers[il];
    STRATA_TRY(bind_attention(b, hp, il, /*biases=*/true, l));
    STRATA_TRY(bind_moe(b, hp, il, "ffn_norm.weight", l));
    l.moe_cfg.router = MoeRouter::moe_router_softmax_topk;
    MoeWeights& m = l.moe_w;
    // Shared expert: width from expert_shared_feed_forward_length, else from the tensor.
    const TensorView* gs = b.find(blk_name(il, "ffn_gate_shexp.weight"));
    if (!gs) continue;
    const int64_t F = hp.n_ff_shexp > 0 ? hp.n_ff_shexp : gs->ne[1];
    STRATA_ASSIGN(m.gate_shexp, b.matrix(blk_name(il, "ffn_gate_shexp.weight"), {d, F}));
    STRATA_ASSIGN(m.up_shexp, b.matrix(blk_name(il, "ffn_up_shexp.weight"), {d, F}));
    STRATA_ASSIGN(m.down_shexp, b.matrix(blk_name(il, "ffn_down_shexp.weight"), {F, d}));
    STRATA_ASSIGN(const TensorView* gi,
                  b.optional(blk_name(il, "ffn_gate_inp_shexp.weight"), {d}, types_f32()));
    m.gate_inp_shexp = gi ? static_cast<const float*>(gi->data) : nullptr;
    l.moe_cfg.n_ff_shexp = static_cast<int>(F);
    hp.n_ff_shexp = static_cast<int>(F);  // the session's scratch is sized from hp (decoder_scratch)
  }
  return make_decoder(std::move(hp), std::move(w));
}

}  // namespace strata
