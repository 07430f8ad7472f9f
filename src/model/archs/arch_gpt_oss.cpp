// gpt-oss (llama.cpp's OPENAI_MOE): pre-norm decoder with attention biases and per-head sinks,
// NEOX RoPE with YaRN, sliding-window attention on even layers (pattern 2) and full attention
// on odd ones; MoE routed by top-k of the raw (biased) router logits with a softmax over the
// selected k, expert biases, and the clamped "swiglu_oai" activation (α = 1.702, limit 7,
// hard-coded by the reference implementation, not in the GGUF).
#include <variant>
#include <vector>

#include "model/arch.h"
#include "model/archs/decoder.h"
#include "model/weights.h"

namespace strata {

namespace {

// Which layers use the sliding window: `attention.sliding_window_pattern` as one flag per layer,
// or as a period n (layer il slides iff il % n < n - 1; 0 = all); default period 2 (even layers).
Result<std::vector<bool>> sliding_layers(const GgufFile& f, int n_layer) {
  const char* key = "gpt-oss.attention.sliding_window_pattern";
  std::vector<bool> swa(n_layer);
  if (const GgufArray* arr = f.get_array(key)) {
    if (static_cast<int>(arr->items.size()) != n_layer)
      return err("metadata key '%s': %zu flags for %d layers", key, arr->items.size(), n_layer);
    for (int il = 0; il < n_layer; ++il) {
      const GgufValue& v = arr->items[il];
      int64_t x = 0;
      if (v.type == GgufValueType::boolean) {
        x = std::get<bool>(v.v) ? 1 : 0;
      } else if (!v.as_int(&x)) {
        return err("metadata key '%s': element %d is not a bool", key, il);
      }
      swa[il] = x != 0;
    }
    return swa;
  }
  STRATA_ASSIGN(int64_t n, f.get_int_or(key, 2));
  if (n < 0 || n > (int64_t{1} << 20))
    return err("metadata key '%s': bad period %lld", key, static_cast<long long>(n));
  for (int il = 0; il < n_layer; ++il) swa[il] = n == 0 || (il % n < n - 1);
  return swa;
}

Result<HParams> gpt_oss_hparams(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, hparams_read_common(f));
  hp.rope_style = RopeStyle::rope_style_neox;
  if (hp.n_expert == 0) return err("gpt-oss: gpt-oss.expert_count missing or 0");
  if (hp.sliding_window < 1) return err("gpt-oss: gpt-oss.attention.sliding_window missing or 0");
  STRATA_ASSIGN(std::vector<bool> swa, sliding_layers(f, hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    if (swa[il]) {
      hp.layers[il].attn_kind = AttnKind::attn_kind_sliding;
      hp.layers[il].window = hp.sliding_window;
    }
  }
  STRATA_TRY(hparams_validate(hp));
  return hp;
}

}  // namespace

Result<KvSpec> kv_spec_gpt_oss(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, gpt_oss_hparams(f));
  return decoder_kv_spec(hp);
}

Result<std::unique_ptr<Architecture>> make_arch_gpt_oss(const GgufFile& f) {
  STRATA_ASSIGN(HParams hp, gpt_oss_hparams(f));
  // Sliding-window layers may have their own rope base (rope.freq_base_swa).
  STRATA_ASSIGN(double base_swa, f.get_float_or("gpt-oss.rope.freq_base_swa", hp.rope.freq_base));
  if (!(base_swa > 0.0)) return err("metadata key 'gpt-oss.rope.freq_base_swa': must be > 0");

  WeightBinder b(f);
  DecoderWeights w;
  STRATA_TRY(bind_decoder_io(b, hp, w));
  const int64_t d = hp.n_embd, E = hp.n_expert;
  for (int il = 0; il < hp.n_layer; ++il) {
    DecoderLayer& l = w.layers[il];
    STRATA_TRY(bind_attention(b, hp, il, /*biases=*/true, l));
    if (hp.layers[il].attn_kind == AttnKind::attn_kind_sliding)
      l.attn.rope.freq_base = static_cast<float>(base_swa);
    STRATA_ASSIGN(const TensorView* sinks,
                  b.require(blk_name(il, "attn_sinks.weight"), {hp.n_head}, types_f32()));
    l.attn_w.sinks = static_cast<const float*>(sinks->data);
    if (!l.attn_w.bo) return err("tensor '%s': missing", blk_name(il, "attn_output.bias").c_str());

    STRATA_TRY(bind_moe(b, hp, il, "post_attention_norm.weight", l));
    MoeConfig& c = l.moe_cfg;
    c.router = MoeRouter::moe_router_topk_softmax;
    c.act = ExpertAct::expert_act_swiglu_oai;
    const int64_t F = c.n_ff;
    MoeWeights& m = l.moe_w;
    STRATA_ASSIGN(const TensorView* gb, b.require(blk_name(il, "ffn_gate_inp.bias"), {E}, types_f32()));
    STRATA_ASSIGN(const TensorView* g_b, b.require(blk_name(il, "ffn_gate_exps.bias"), {F, E}, types_f32()));
    STRATA_ASSIGN(const TensorView* u_b, b.require(blk_name(il, "ffn_up_exps.bias"), {F, E}, types_f32()));
    STRATA_ASSIGN(const TensorView* d_b, b.require(blk_name(il, "ffn_down_exps.bias"), {d, E}, types_f32()));
    m.gate_inp_b = static_cast<const float*>(gb->data);
    m.gate_exps_b = static_cast<const float*>(g_b->data);
    m.up_exps_b = static_cast<const float*>(u_b->data);
    m.down_exps_b = static_cast<const float*>(d_b->data);
  }
  return make_decoder(std::move(hp), std::move(w));
}

}  // namespace strata
