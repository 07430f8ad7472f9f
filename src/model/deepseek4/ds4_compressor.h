// DeepSeek-V4 KV compressors (deepseek-v4.md §2.3.2-2.3.3, §5.1; fixtures README §7).
//
// Per token t the caller projects the attention input c_t into
//   kv_t    = comp.wkv  . c_t                      [cw]
//   score_t = comp.wgate . c_t + ape[t mod ratio]  [cw]
// with cw = 2*width for the overlapping ratio-4 compressor (CSA and the indexer's key
// compressor) and cw = width for ratio 128 (HCA). Block j (tokens j*ratio .. j*ratio+ratio-1)
// pools, per output channel ch < width, a softmax over the token axis:
//   overlap:  candidates = first-half channel ch of block j-1's tokens (absent for j = 0)
//             + second-half channel width+ch of block j's tokens          (2*ratio values)
//   plain:    candidates = channel ch of block j's tokens                   (ratio values)
//   entry[ch] = sum_k softmax_k(score_k[ch]) * kv_k[ch]
// then RMSNorm(comp.norm) and RoPE (compressed-layer rope) at position j*ratio
// (compressor_finish). Entry j becomes visible to queries at positions >= j*ratio+ratio-1.
//
// Two ways to run it, bit-identical by construction (both call compressor_pool):
//   compress_sequence  — all complete blocks of a whole sequence (positions 0..n-1);
//   CompressorState    — decode-time rolling state: a ring of the last 2*ratio (overlap) or
//                        ratio (plain) token rows, fed one token at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/row_cache.h"
#include "model/deepseek4/ds4_rope.h"

namespace strata::ds4 {

struct CompressorShape {
  int ratio = 4;        // tokens per compressed entry (4 or 128 in V4)
  int width = 0;        // output entry width (head_dim, or indexer head_dim)
  bool overlap = true;  // ratio-4 overlapping compressor (input width 2*width)

  int in_width() const { return overlap ? 2 * width : width; }
  int state_rows() const { return overlap ? 2 * ratio : ratio; }
  int state_width() const { return 2 * in_width(); }  // a state row: kv [in_width] then score [in_width]
};

// The compressor of a deepseek4 layer: ratio 4 overlaps (CSA and its indexer), 128 does not (HCA).
inline CompressorShape comp_shape(int ratio, int width) {
  return CompressorShape{ratio, width, ratio == 4};
}

// Number of compressed entries visible to a query at position pos: j < floor((pos+1)/ratio).
inline int64_t compressed_visible(int64_t pos, int ratio) {
  return (pos + 1) / ratio;
}

// Pools one entry. prev_* (ratio rows of in_width, stride in floats) may be null: first block.
// cur_* point at the block's ratio rows. out [width] (raw: not normed, not roped).
void compressor_pool(const CompressorShape& s, const float* prev_kv, const float* prev_score,
                     const float* cur_kv, const float* cur_score, int64_t stride, float* out);

// All complete blocks of tokens 0..n_tokens-1: kv, score [n_tokens][in_width] (ape included).
// out [n_tokens/ratio][width]. Returns the number of entries written.
int64_t compress_sequence(const CompressorShape& s, const float* kv, const float* score, int64_t n_tokens,
                          float* out);

// entry [width] <- RoPE(RMSNorm(entry) * norm_w) at position block*ratio.
void compressor_finish(const CompressorShape& s, const float* norm_w, float eps, const RopeParams& rope,
                       int64_t block, float* entry);

// Decode-time rolling state of one compressor for one sequence (f32, as llama.cpp keeps it), over
// rows it does not own: a KV part of kind state (kv/kv_spec.h) of state_rows() rows of
// state_width() floats, the spec the cache was allocated from and the plan prices.
class CompressorState {
 public:
  CompressorState() = default;
  CompressorState(const CompressorShape& s, RowCache* rows) { init(s, rows); }
  void init(const CompressorShape& s, RowCache* rows);
  void reset();  // forget the sequence, keep the allocation

  // Feeds the token at position pos; positions must arrive in order 0, 1, 2, ...
  // When pos closes a block ((pos+1) % ratio == 0) writes the raw pooled entry [width] to out
  // and returns true.
  bool push(int64_t pos, const float* kv, const float* score, float* out);

  int64_t n_pushed() const { return n_pushed_; }
  const CompressorShape& shape() const { return shape_; }
  // Bytes held: state_rows x in_width x (kv + score) x 4.
  size_t bytes() const { return rows_ ? rows_->bytes() : 0; }

 private:
  CompressorShape shape_;
  RowCache* rows_ = nullptr;  // row pos mod state_rows: kv [in_width], score [in_width]
  int64_t n_pushed_ = 0;
};

}  // namespace strata::ds4
