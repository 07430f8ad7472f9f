// qwen3moe (Qwen3-MoE): pre-norm decoder; q/k RMS-normed per head, NEOX RoPE over the full
// head; MoE with softmax → top-k → renormalised weights, no shared expert.
#include "model/arch.h"
#include "model/archs/decoder.h"
#include "model/weights.h"

namespace strata {

namespace {

Result<HParams> qwen3moe_hparams(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, hparams_read_common(f));
  hp.rope_style = RopeStyle::rope_style_neox;
  if (hp.n_expert == 0) return err("qwen3moe: qwen3moe.expert_count missing or 0");
  STRATA_TRY(hparams_validate(hp));
  return hp;
}

}  // namespace

Result<KvSpec> kv_spec_qwen3moe(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, qwen3moe_hparams(f));
  return decoder_kv_spec(hp);
}

Result<std::unique_ptr<Architecture>> make_arch_qwen3moe(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, qwen3moe_hparams(f));

  WeightBinder b(f);
  DecoderWeights w;
  STRATA_TRY(bind_decoder_io(b, hp, w));
  for (int il = 0; il < hp.n_layer; ++il) {
    DecoderLayer& l = w.layers[il];
    STRATA_TRY(bind_attention(b, hp, il, /*biases=*/false, l));
    STRATA_ASSIGN(const TensorView* qn,
                  b.require(blk_name(il, "attn_q_norm.weight"), {hp.head_dim_k}, types_f32()));
    STRATA_ASSIGN(const TensorView* kn,
                  b.require(blk_name(il, "attn_k_norm.weight"), {hp.head_dim_k}, types_f32()));
    l.attn_w.q_norm = static_cast<const float*>(qn->data);
    l.attn_w.k_norm = static_cast<const float*>(kn->data);
    STRATA_TRY(bind_moe(b, hp, il, "ffn_norm.weight", l));
    l.moe_cfg.router = MoeRouter::moe_router_softmax_topk_renorm;
  }
  return make_decoder(std::move(hp), std::move(w));
}

}  // namespace strata
