// DeepSeek-V4 weight binding (deepseek-v4.md §6.3; fixtures README §7): every tensor looked up
// once with its expected ggml shape and allowed types, so a bad file fails at load with the
// tensor name and expected vs actual.
#pragma once

#include <vector>

#include "format/gguf.h"
#include "kernels/device.h"
#include "model/blocks/device_weights.h"
#include "model/blocks/moe.h"
#include "model/deepseek4/ds4_hparams.h"
#include "model/weights.h"

namespace strata::ds4 {

struct Ds4HcSite {
  const float* fn = nullptr;     // [n_mix][hc*d]
  const float* base = nullptr;   // [n_mix]
  const float* scale = nullptr;  // [3]
};

struct Ds4Compressor {
  const TensorView* wkv = nullptr;    // {d, coff*width}
  const TensorView* wgate = nullptr;  // {d, coff*width}
  const float* ape = nullptr;         // [ratio][coff*width]
  const float* norm = nullptr;        // [width]
};

struct Ds4Layer {
  Ds4HcSite hc_attn, hc_ffn;
  const float* attn_norm = nullptr;
  const float* attn_sinks = nullptr;     // [n_head]
  const TensorView* wq_a = nullptr;      // {d, q_lora}
  const float* q_a_norm = nullptr;       // [q_lora]
  const TensorView* wq_b = nullptr;      // {q_lora, n_head*hd}
  const TensorView* wkv = nullptr;       // {d, hd}
  const float* kv_norm = nullptr;        // [hd]
  const TensorView* wo_a = nullptr;      // {n_head*hd/G, G*o_lora}
  const TensorView* wo_b = nullptr;      // {G*o_lora, d}
  Ds4Compressor comp;                    // ratio != 0
  const TensorView* idx_proj = nullptr;  // ratio 4: {d, ih}
  const TensorView* idx_q_b = nullptr;   // {q_lora, ih*ihd}
  Ds4Compressor idx_comp;                // width ihd
  const float* ffn_norm = nullptr;
  const TensorView* gate_inp = nullptr;  // {d, E} (f32)
  const int32_t* tid2eid = nullptr;      // hash layers: [n_vocab][n_used]
  const float* probs_b = nullptr;        // other layers: [E]
  // Routed experts {d, F, E} / {F, d, E} and the shared expert {d, F*n_shared} / {F*n_shared, d},
  // with the config of the one MoE loop (model/blocks/moe.h: clamped SwiGLU, this layer's limits);
  // the routing (gate_inp, tid2eid / probs_b) is DeepSeek's own.
  MoeWeights moe_w;
  MoeConfig moe_cfg;
};

struct Ds4Weights {
  const TensorView* token_embd = nullptr;  // {d, n_vocab}
  const float* output_norm = nullptr;
  const TensorView* output = nullptr;  // {d, n_vocab}
  const float* head_fn = nullptr;      // [hc][hc*d]
  const float* head_base = nullptr;    // [hc]
  const float* head_scale = nullptr;   // [1]
  std::vector<Ds4Layer> layers;
};

// Binds everything; sets p.n_vocab from token_embd. tid2eid ids are checked < n_expert.
Result<Ds4Weights> ds4_bind_weights(const GgufFile& f, Ds4Params& p);

// The dense projections and the attention sinks as the device the layers run on names them
// (Architecture::place): every linear of the forward goes through Device::run_linear, the
// attention core through Device::run_sparse_attention (its window and compressed rows live on
// that device). The mHC mixes, norms, RoPE, compressors' pooling, the indexer (its keys and
// top-k) and routing stay on the host; routed and shared experts go through the MoE loop
// (model/blocks/moe.h) and the expert store.
struct Ds4DeviceCompressor {
  DeviceMat wkv, wgate;
};
struct Ds4DeviceLayer {
  DeviceMat wq_a, wq_b, wkv, wo_b, gate_inp;
  std::vector<DeviceMat> wo_a;  // [o_groups]: output rows g·o_lora .. of attn_output_a
  Ds4DeviceCompressor comp, idx_comp;
  DeviceMat idx_proj, idx_q_b;
  DeviceVec sinks;  // [n_head]
};
struct Ds4DeviceWeights {
  Device* dev = nullptr;
  std::vector<Ds4DeviceLayer> layers;
  DeviceMat output;
};
// Imports w's dense projections into dw (bound to its device) and names them in *out.
Status ds4_place_weights(const Ds4Params& p, const Ds4Weights& w, DeviceWeights& dw, Ds4DeviceWeights* out);

}  // namespace strata::ds4
