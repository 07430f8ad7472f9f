// DeepSeek-V4.1 weight binding from a safetensors checkpoint in DeepSeek's own namespace
// (fixtures-v41 README "model.safetensors"). Every tensor is looked up once with its expected
// dtype and shape; a missing tensor or a wrong dtype/shape fails the load with the file, the
// tensor, expected vs actual. Matrices are [out][in] row-major (PyTorch Linear: y = x W^T).
// Two ways to hold them, by the numerics the model runs (v41_forward.h V41Numerics):
//   oracle: every matrix converted to f32 (Mat::w; values stay bf16-exact; the forward rounds
//     activations like the reference);
//   fast: every matrix in a type strata's kernels run at full speed (Mat::tv over Mat::bytes):
//     BF16 stays BF16; FP8 (E4M3 x UE8M0 block scale) and F32 whose values are all bf16-exact
//     become BF16 (lossless: checked value by value), other F32 stays F32; FP4 routed experts
//     (E2M1 pairs + UE8M0 per 32) become MXFP4 blocks (lossless, the same codes). The routed
//     experts are stacked per layer (xw1 / xw3 / xw2, ggml order {in, out, E}) for the MoE loop.
#pragma once

#include <vector>

#include "base/status.h"
#include "format/tensor_view.h"
#include "format/safetensors_dir.h"
#include "model/deepseek_v41/v41_config.h"

namespace strata::v41 {

struct Mat {
  std::vector<float> w;  // oracle: [rows][cols] f32
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> bytes;  // fast: the native rows
  TensorView tv;               // fast: {cols, rows} (or {cols, rows, E}) over bytes
  const float* row(int64_t r) const { return w.data() + r * cols; }
  Mat() = default;
  Mat(Mat&&) = default;  // moving keeps bytes' buffer, so tv stays valid
  Mat& operator=(Mat&&) = default;
  Mat(const Mat&) = delete;
  Mat& operator=(const Mat&) = delete;
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
  std::vector<Mat> w1, w2, w3;  // oracle: [E]
  Mat xw1, xw3, xw2;            // fast: the routed experts stacked, {D, I, E} / {D, I, E} / {I, D, E}
  Mat sw1, sw2, sw3;
  // Engram (engram layers): table values (e4m3 grid) and per-32 power-of-two scales as F32 (fast:
  // as E4M3 / UE8M0 bytes in Mat::bytes when every value has a code)
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
  uint64_t bytes = 0;    // weight bytes held (every tensor bound; f32 in oracle mode)
};

// engram_tables = false leaves every layer's Engram table (e_embed / e_scale) unloaded, with
// rows == 0 and nothing allocated: the tables are served by a tiered store instead
// (model/engram_tiered.h validates them). The Engram projections are always bound.
// fast: hold the matrices natively (above); the Engram tables and the vectors stay f32.
// routed_experts = false (fast only) binds no routed expert (xw1 / xw3 / xw2 empty): the expert
// store serves them from the shards (model/deepseek_v41/v41_experts.h).
Result<Weights> bind_weights(const SafetensorsDir& d, const Config& c, bool engram_tables = true,
                             bool fast = false, bool routed_experts = true);

}  // namespace strata::v41
