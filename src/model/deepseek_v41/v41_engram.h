// Engram (deepseek-v4.md §4.5; fixtures-v41 README "Engram hashing"): n-gram hash rows looked up
// by token ids alone, then a gated write of one value vector into every hc stream.
//
// Hash at position t, Engram layer k: c_s = compressed id of the token at t-s (s < max_ngram),
// pad_id once t-s < 0 (and for every further slot). p_s = c_s * mult[k][s] (int64, no
// overflow: the config loader checks mult <= INT64_MAX / compressed_vocab). h = p_0; for
// n = 1..max_ngram-1: h ^= p_n and, per head j, row = h mod prime[k][n-1][j] + offset[...].
// -> (max_ngram-1)*n_heads row ids, n-gram size major, head minor.
//
// Gate per stream c (float32): w = q_w[c]*k_w[c];
//   dot = sum_d(h_c*w*key_c) * rsqrt(mean(h_c^2)+eps) * rsqrt(mean(key_c^2)+eps) / sqrt(D)
//   g = sigmoid(sign(dot) * sqrt(max(|dot|, 1e-6)));  h_c <- bf16(h_c + g*value)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "model/deepseek_v41/v41_config.h"

namespace strata::v41 {

struct Mat;

// Where the forward gets Engram table rows from. `engram_layer` indexes config
// engram_layer_ids (0..n_engram-1, not the model layer). Step protocol (forward thread only):
//   begin_step(tokens)          a forward over these token ids starts;
//   prefetch(k, ids) per layer  every row id the step will read from Engram layer k, issued as
//                               soon as the token ids are known (before any layer runs): a
//                               tiered store starts its reads here;
//   rows(k, ids)                as the layers run;
//   end_step()                  the forward is done (also after an error).
// rows() writes n = row_ids.size() dequantised rows [n][engram_head_dim], each
// bf16(value * scale[col/32]) exactly like engram_dequant_row, in the order of row_ids
// (duplicates allowed). Row ids are < that layer's engram_num_embeddings (the hash guarantees
// it). Errors name the table and row.
struct EngramRowSource {
  virtual ~EngramRowSource() = default;
  virtual Status rows(int engram_layer, std::span<const int64_t> row_ids, float* out) = 0;
  virtual void begin_step(std::span<const int32_t> tokens) { (void)tokens; }
  virtual Status prefetch(int engram_layer, std::span<const int64_t> row_ids) {
    (void)engram_layer;
    (void)row_ids;
    return {};
  }
  virtual void end_step() {}
};

// The resident source: the tables as loaded with the weights (values + scales as F32).
class ResidentEngramRows : public EngramRowSource {
 public:
  // values[k], scales[k]: table k [rows][head_dim] and [rows][head_dim/32]; must outlive this.
  ResidentEngramRows(std::vector<const Mat*> values, std::vector<const Mat*> scales, int head_dim)
      : values_(std::move(values)), scales_(std::move(scales)), head_dim_(head_dim) {}
  Status rows(int engram_layer, std::span<const int64_t> row_ids, float* out) override;

 private:
  std::vector<const Mat*> values_, scales_;
  int head_dim_;
};

// Every row id position pos0..pos0+n-1 reads from Engram layer k: out[(t*ncol) + c],
// ncol = (max_ngram-1)*n_heads. ids = the raw token history (ids[i] at position i, at least
// pos0+n of them). This is what the forward prefetches per step.
void engram_step_rows(const Config& c, const EngramMeta& m, int k, const int32_t* ids, int64_t pos0,
                      int64_t n, int64_t* out);

// cids[s] = compressed id of the token at t-s (pad where absent), s < max_ngram.
// rows: [(max_ngram-1)*n_heads].
void engram_hash(const EngramMeta& m, int k, const int64_t* cids, int max_ngram, int n_heads, int64_t* rows);

// The cids window for position `pos` of a history `ids` (raw token ids, ids[i] at position i,
// at least pos+1 of them): cids[s] = token_map[ids[pos-s]] or pad_id.
void engram_cids(const EngramMeta& m, const int32_t* ids, int64_t pos, int max_ngram, int64_t* cids);

// One row of the table, dequantised like the reference: bf16(value * scale[col/32]).
void engram_dequant_row(const float* values, const float* scales, int head_dim, float* out);

// In place on H [hc][D] (bf16 values); key [hc][D], value [D], qw/kw [hc][D].
void engram_gate(float* H, const float* key, const float* value, const float* qw, const float* kw, int hc,
                 int64_t D, float eps);

}  // namespace strata::v41
