#include "model/deepseek_v41/v41_engram.h"

#include <cmath>
#include <vector>

#include "memory/engram/engram_table.h"
#include "model/deepseek_v41/v41_quant.h"
#include "model/deepseek_v41/v41_weights.h"

namespace strata::v41 {

void engram_hash(const EngramMeta& m, int k, const int64_t* cids, int max_ngram, int n_heads, int64_t* rows) {
  const auto& mul = m.multipliers[static_cast<size_t>(k)];
  const auto& pr = m.primes[static_cast<size_t>(k)];
  const auto& off = m.offsets[static_cast<size_t>(k)];
  int64_t h = cids[0] * mul[0];
  for (int n = 1; n < max_ngram; ++n) {
    h ^= cids[n] * mul[static_cast<size_t>(n)];
    for (int j = 0; j < n_heads; ++j) {
      const size_t c = static_cast<size_t>((n - 1) * n_heads + j);
      rows[c] = h % pr[c] + off[c];  // h >= 0: products of non-negative ids and odd positive multipliers
    }
  }
}

void engram_cids(const EngramMeta& m, const int32_t* ids, int64_t pos, int max_ngram, int64_t* cids) {
  for (int s = 0; s < max_ngram; ++s) {
    const int64_t p = pos - s;
    cids[s] = p >= 0 ? m.token_map[static_cast<size_t>(ids[p])] : m.pad_id;
  }
}

void engram_dequant_row(const float* values, const float* scales, int head_dim, float* out) {
  for (int i = 0; i < head_dim; ++i) out[i] = bf16r(values[i] * scales[i / 32]);
}

void engram_gate(float* H, const float* key, const float* value, const float* qw, const float* kw, int hc,
                 int64_t D, float eps) {
  const float inv_sqrt_d = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  std::vector<float> prod(static_cast<size_t>(D));
  for (int c = 0; c < hc; ++c) {
    float* h = H + c * D;
    const float* k = key + c * D;
    for (int64_t d = 0; d < D; ++d)
      prod[static_cast<size_t>(d)] = h[d] * (qw[c * D + d] * kw[c * D + d]) * k[d];
    const float dot = torch_sum_f32(prod.data(), D);  // the reference's (h * w * key).sum(-1)
    const float rh = 1.0f / std::sqrt(torch_mean_sq_f32(h, D) + eps);
    const float rk = 1.0f / std::sqrt(torch_mean_sq_f32(k, D) + eps);
    const float g0 = dot * rh * rk * inv_sqrt_d;
    const float sgn = g0 > 0.0f ? 1.0f : (g0 < 0.0f ? -1.0f : 0.0f);
    const float g = 1.0f / (1.0f + std::exp(-(sgn * std::sqrt(std::max(std::fabs(g0), 1e-6f)))));
    for (int64_t d = 0; d < D; ++d) h[d] = bf16r(h[d] + g * value[d]);
  }
}

Status ResidentEngramRows::rows(int engram_layer, std::span<const int64_t> row_ids, float* out) {
  if (engram_layer < 0 || engram_layer >= static_cast<int>(values_.size()))
    return err("engram rows: table %d of %zu requested", engram_layer, values_.size());
  const Mat& v = *values_[static_cast<size_t>(engram_layer)];
  const Mat& s = *scales_[static_cast<size_t>(engram_layer)];
  // Fast mode holds a table as E4M3 / UE8M0 bytes where every value has a code, else f32: the row
  // is decoded by the SSD tier's dequant (memory/engram/engram_table.h), which reads either.
  EngramTable t;
  t.head_dim = head_dim_;
  t.vtype = v.w.empty() ? EngramValueType::f8_e4m3 : EngramValueType::f32;
  t.stype = s.w.empty() ? EngramScaleType::e8m0 : EngramScaleType::f32;
  for (size_t i = 0; i < row_ids.size(); ++i) {
    const int64_t r = row_ids[i];
    if (r < 0 || r >= v.rows)
      return err("engram rows: table %d row %lld out of range [0, %lld)", engram_layer,
                 static_cast<long long>(r), static_cast<long long>(v.rows));
    const uint8_t* vr =
        v.w.empty() ? v.bytes.data() + r * v.cols : reinterpret_cast<const uint8_t*>(v.row(r));
    const uint8_t* sr =
        s.w.empty() ? s.bytes.data() + r * s.cols : reinterpret_cast<const uint8_t*>(s.row(r));
    engram_row_dequant(t, vr, sr, out + static_cast<int64_t>(i) * head_dim_);
  }
  return {};
}

void engram_step_rows(const Config& c, const EngramMeta& m, int k, const int32_t* ids, int64_t pos0,
                      int64_t n, int64_t* out) {
  const int ng = c.engram_max_ngram, ncol = c.n_hash_cols();
  int64_t cids[64];
  STRATA_ASSERT(ng <= 64);
  for (int64_t t = 0; t < n; ++t) {
    engram_cids(m, ids, pos0 + t, ng, cids);
    engram_hash(m, k, cids, ng, c.engram_heads, out + t * ncol);
  }
}

}  // namespace strata::v41
