// DeepSeek-V4.1 weight binding from a safetensors checkpoint in DeepSeek's own namespace
// (fixtures-v41 README "model.safetensors"). Every tensor is looked up once with its expected
// dtype and shape; a missing tensor or a wrong dtype/shape fails the load with the file, the
// tensor, expected vs actual. BF16/F32 weights are converted to f32 at load (values stay
// bf16-exact; the forward rounds activations like the reference).
// Matrices are [out][in] row-major (PyTorch Linear: y = x W^T).
#pragma once

#include <vector>

#include "base/status.h"
#include "format/safetensors_dir.h"
#include "model/deepseek_v41/v41_config.h"

namespace strata::v41 {

struct Mat {
  std::vector<float> w;  // [rows][cols]
  int64_t rows = 0, cols = 0;
  const float* row(int64_t r) const { return w.data() + r * cols; }
};

struct HcSite {
  Mat fn;                    // [(2+hc)*hc][hc*dim]
  std::vector<float> base;   // [(2+hc)*hc]
  std::vector<float> scale;  // [3]
};

struct LayerW {
  HcSite hc_attn, hc_ffn;
  std::vector<float> attn_norm, ffn_norm, attn_sink, q_norm, kv_norm;
  Mat wq_a, wq_b, wkv, wo_a, wo_b;
  // compressor (KV sources): wkv F32 for ratio > 1 (BF16 for ratio 1), wgate only ratio > 1
  Mat c_wkv, c_wgate;
  std::vector<float> c_norm;
  // indexer (index sources); wk / k_norm only on KV sources
  Mat i_wq_b, i_wproj, i_wk;
  std::vector<float> i_knorm;
  // MoE
  Mat gate;
  std::vector<float> gate_bias;
  std::vector<Mat> w1, w2, w3;  // [E]
  Mat sw1, sw2, sw3;
  // Engram (engram layers): table values (e4m3 grid) and per-32 power-of-two scales as F32
  Mat e_embed, e_scale;
  Mat e_wkv;     // [dim*(hc+1)][n_hash_cols*head_dim]
  Mat e_q, e_k;  // [hc][dim]
};

struct Weights {
  Mat embed;  // [vocab][dim]
  Mat head;   // [vocab][dim]
  std::vector<float> norm;
  std::vector<LayerW> layers;
  size_t n_tensors = 0;  // tensors bound
  uint64_t bytes = 0;    // f32 bytes held (every tensor bound)
};

// engram_tables = false leaves every layer's Engram table (e_embed / e_scale) unloaded, with
// rows == 0 and nothing allocated: the tables are served by a tiered store instead
// (model/engram_tiered.h validates them). The Engram projections are always bound.
Result<Weights> bind_weights(const SafetensorsDir& d, const Config& c, bool engram_tables = true);

}  // namespace strata::v41
