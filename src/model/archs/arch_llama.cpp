// llama: pre-norm decoder with NORM (adjacent-pair) RoPE over rope.dimension_count dims; the
// FFN is dense SwiGLU, or a Mixtral-style MoE (softmax → top-k → renormalise) when
// llama.expert_count > 0.
#include "model/arch.h"
#include "model/archs/decoder.h"
#include "model/weights.h"

namespace strata {

namespace {

Result<HParams> llama_hparams(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, hparams_read_common(f));
  hp.rope_style = RopeStyle::rope_style_norm;
  STRATA_TRY(hparams_validate(hp));
  return hp;
}

}  // namespace

Result<KvSpec> kv_spec_llama(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, llama_hparams(f));
  return decoder_kv_spec(hp);
}

Result<std::unique_ptr<Architecture>> make_arch_llama(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, llama_hparams(f));

  WeightBinder b(f);
  DecoderWeights w;
  STRATA_TRY(bind_decoder_io(b, hp, w));
  for (int il = 0; il < hp.n_layer; ++il) {
    DecoderLayer& l = w.layers[il];
    STRATA_TRY(bind_attention(b, hp, il, /*biases=*/false, l));
    if (hp.is_moe()) {
      STRATA_TRY(bind_moe(b, hp, il, "ffn_norm.weight", l));
      l.moe_cfg.router = MoeRouter::moe_router_softmax_topk_renorm;
      continue;
    }
    if (hp.n_ff < 1) return err("llama: llama.feed_forward_length missing or 0 (dense model)");
    const int64_t d = hp.n_embd, F = hp.n_ff;
    STRATA_ASSIGN(const TensorView* fn, b.require(blk_name(il, "ffn_norm.weight"), {d}, types_f32()));
    l.ffn_norm = static_cast<const float*>(fn->data);
    l.moe = false;
    STRATA_ASSIGN(l.ffn_gate, b.matrix(blk_name(il, "ffn_gate.weight"), {d, F}));
    STRATA_ASSIGN(l.ffn_up, b.matrix(blk_name(il, "ffn_up.weight"), {d, F}));
    STRATA_ASSIGN(l.ffn_down, b.matrix(blk_name(il, "ffn_down.weight"), {F, d}));
  }
  return make_decoder(std::move(hp), std::move(w));
}

}  // namespace strata
