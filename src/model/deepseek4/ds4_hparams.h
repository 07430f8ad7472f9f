// DeepSeek-V4 (`deepseek4`) hyper-parameters from GGUF metadata (deepseek-v4.md §6.2).
// Every size comes from the file; bad or inconsistent values give an error naming the key.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "model/deepseek4/ds4_rope.h"

namespace strata::ds4 {

struct Ds4Params {
  int n_layer = 0, n_embd = 0, n_head = 0, head_dim = 0, n_rot = 0, n_vocab = 0;
  int64_t n_ctx_train = 0;
  float eps = 1e-6f;
  int q_lora = 0, o_groups = 0, o_lora = 0, n_swa = 0;
  std::vector<int> ratios;  // [n_layer]: 0 (window only), 4 (CSA), 128 (HCA)
  float rope_base = 10000.0f, comp_rope_base = 160000.0f;
  float yarn_factor = 1.0f, beta_fast = 32.0f, beta_slow = 1.0f;
  int yarn_orig = 0;
  int ih = 0, ihd = 0, itopk = 0;  // indexer heads, head dim, top-k
  int n_expert = 0, n_used = 0, n_ff_exp = 0, n_shared = 0;
  float w_scale = 1.0f;
  bool w_norm = true;
  std::vector<float> clamp_exp, clamp_shexp;  // [n_layer]
  int hc = 4, hc_iters = 20;
  float hc_eps = 1e-6f;
  int n_hash = 0;  // layers < n_hash route by tid2eid

  int n_mix() const { return (2 + hc) * hc; }
  RopeParams rope_for(int il) const;  // ratio-0 layers: plain; others: compress base + YaRN
};

Result<Ds4Params> ds4_params_read(const GgufFile& f);

}  // namespace strata::ds4
