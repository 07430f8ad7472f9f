#include "model/deepseek4/ds4_compressor.h"

#include <cstring>

#include "base/assert.h"
#include "model/deepseek4/ds4_math.h"

namespace strata::ds4 {

void compressor_pool(const CompressorShape& s, const float* prev_kv, const float* prev_score,
                     const float* cur_kv, const float* cur_score, int64_t stride, float* out) {
  const int r = s.ratio;
  const int64_t cur_off = s.overlap ? s.width : 0;  // current block reads the second half
  STRATA_ASSERT(r > 0 && r <= 128);
  float sc[2 * 128];  // candidates of one channel
  for (int ch = 0; ch < s.width; ++ch) {
    int n = 0;
    const bool has_prev = s.overlap && prev_kv != nullptr;
    if (has_prev)
      for (int i = 0; i < r; ++i) sc[n++] = prev_score[i * stride + ch];
    for (int i = 0; i < r; ++i) sc[n++] = cur_score[i * stride + cur_off + ch];
    softmax_inplace(sc, n);
    double acc = 0.0;  // ggml: mul in f32, sum_rows in double
    int k = 0;
    if (has_prev)
      for (int i = 0; i < r; ++i, ++k) acc += static_cast<double>(prev_kv[i * stride + ch] * sc[k]);
    for (int i = 0; i < r; ++i, ++k) acc += static_cast<double>(cur_kv[i * stride + cur_off + ch] * sc[k]);
    out[ch] = static_cast<float>(acc);
  }
}

int64_t compress_sequence(const CompressorShape& s, const float* kv, const float* score, int64_t n_tokens,
                          float* out) {
  const int64_t cw = s.in_width();
  const int64_t nb = n_tokens / s.ratio;
  for (int64_t j = 0; j < nb; ++j) {
    const int64_t cur = j * s.ratio * cw;
    const float* pk = nullptr;
    const float* ps = nullptr;
    if (s.overlap && j > 0) {
      pk = kv + (j - 1) * s.ratio * cw;
      ps = score + (j - 1) * s.ratio * cw;
    }
    compressor_pool(s, pk, ps, kv + cur, score + cur, cw, out + j * s.width);
  }
  return nb;
}

void compressor_finish(const CompressorShape& s, const float* norm_w, float eps, const RopeParams& rope,
                       int64_t block, float* entry) {
  rms_norm(entry, norm_w, s.width, eps, entry);
  rope_rows(rope, block * s.ratio, entry, 1, s.width, /*inverse=*/false);
}

void CompressorState::init(const CompressorShape& s, RowCache* rows) {
  STRATA_ASSERT(s.ratio > 0 && s.ratio <= 128 && s.width > 0);
  STRATA_ASSERT(rows && rows->width() == s.state_width() && rows->capacity() == s.state_rows() &&
                !rows->ring());
  shape_ = s;
  rows_ = rows;
  reset();
}

void CompressorState::reset() {
  if (rows_) rows_->clear();
  n_pushed_ = 0;
}

bool CompressorState::push(int64_t pos, const float* kv, const float* score, float* out) {
  STRATA_ASSERT_MSG(pos == n_pushed_, "compressor positions must arrive in order");
  const int rows = shape_.state_rows();
  const int64_t cw = shape_.in_width();
  const int64_t slot = pos % rows;
  float* const base = rows_->row(0);  // rows are contiguous: row i at base + i * 2 * cw
  std::memcpy(base + slot * 2 * cw, kv, static_cast<size_t>(cw) * sizeof(float));
  std::memcpy(base + slot * 2 * cw + cw, score, static_cast<size_t>(cw) * sizeof(float));
  ++n_pushed_;
  const int r = shape_.ratio;
  if ((pos + 1) % r != 0) return false;
  const int64_t j = pos / r;
  const int64_t cur_slot = (j * r) % rows;  // block rows are contiguous in the ring
  const float* pk = nullptr;
  const float* ps = nullptr;
  if (shape_.overlap && j > 0) {
    const int64_t prev_slot = ((j - 1) * r) % rows;
    pk = base + prev_slot * 2 * cw;
    ps = pk + cw;
  }
  const float* ck = base + cur_slot * 2 * cw;
  compressor_pool(shape_, pk, ps, ck, ck + cw, 2 * cw, out);
  return true;
}

}  // namespace strata::ds4
