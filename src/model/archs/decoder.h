// The pre-norm decoder shared by the standard architectures (qwen3moe, llama, qwen2moe,
// gpt-oss): per token one residual row x [n_embd],
//
//   x = embed(token)
//   per layer:  x += attention(RMSNorm(x)·attn_norm)
//               x += ffn(RMSNorm(x)·ffn_norm)          (MoE or dense SwiGLU)
//   logits = output · RMSNorm(x)·output_norm
//
// An arch_<name>.cpp file reads its hyper-parameters, binds its tensors into DecoderLayer
// structs (configs + weights of the shared blocks) and hands them to make_decoder(). An
// architecture whose residual is not one row per token (deepseek4's 4 hyper-connection
// streams) implements Architecture directly instead.
#pragma once

#include <memory>
#include <vector>

#include "model/arch.h"
#include "kernels/attention_block.h"
#include "model/hparams.h"
#include "model/blocks/moe.h"

namespace strata {

struct DecoderLayer {
  const float* attn_norm = nullptr;  // [n_embd]
  AttnConfig attn;
  AttnWeights attn_w;
  const float* ffn_norm = nullptr;  // [n_embd]
  bool moe = true;
  MoeConfig moe_cfg;
  MoeWeights moe_w;
  const TensorView* ffn_gate = nullptr;  // dense FFN (moe == false)
  const TensorView* ffn_up = nullptr;
  const TensorView* ffn_down = nullptr;
};

struct DecoderWeights {
  const TensorView* token_embd = nullptr;  // {n_embd, n_vocab}
  const float* output_norm = nullptr;      // [n_embd]
  const TensorView* output = nullptr;      // {n_embd, n_vocab} (may be token_embd when tied)
  std::vector<DecoderLayer> layers;
};

Result<std::unique_ptr<Architecture>> make_decoder(HParams hp, DecoderWeights w);

// Binding helpers shared by the standard arch files (tensor names as llama.cpp writes them).
class WeightBinder;
// token_embd, output_norm, output (falls back to token_embd when absent); sets hp.n_vocab.
Status bind_decoder_io(const WeightBinder& b, HParams& hp, DecoderWeights& w);
// blk.<il>.attn_{q,k,v,output}.weight (+ .bias when `biases`), attn_norm.
Status bind_attention(const WeightBinder& b, const HParams& hp, int il, bool biases, DecoderLayer& l);
// blk.<il>.ffn_{gate_inp,gate_exps,up_exps,down_exps}.weight and ffn_norm.weight (or `norm_name`).
Status bind_moe(const WeightBinder& b, const HParams& hp, int il, const char* norm_name, DecoderLayer& l);
// The KV parts of the standard decoder: per layer K and V of its kv heads, a ring where it slides.
KvSpec decoder_kv_spec(const HParams& hp, const KvTypes& types = {});
// The largest width dividing every K and V head (a KV type's blocks must fit whole heads).
int64_t decoder_head_width(const HParams& hp);
// The scratch a session allocates for steps of n_batch tokens over n_ctx positions with n_threads
// threads: its arena (projections, the RoPE table, attention rows, the MoE's slots) and its three
// residual rows [n_batch][n_embd] (what DecoderState allocates and the plan prices).
struct DecoderScratch {
  uint64_t arena = 0, rows = 0;
};
DecoderScratch decoder_scratch(const HParams& hp, int64_t n_batch, int64_t n_ctx, int n_threads);
// The AttnConfig every standard layer starts from (scale 1/sqrt(hd_k), eps, rope from hp).
AttnConfig attn_config_from(const HParams& hp, int il);

}  // namespace strata
