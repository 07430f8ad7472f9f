#include "model/deepseek_v41/v41_rope.h"

#include <algorithm>
#include <cmath>

#include "model/deepseek_v41/v41_quant.h"

namespace strata::v41 {

Rope Rope::make(int rd, double base, int original_seq_len, double factor, int beta_fast, int beta_slow) {
  Rope r;
  r.rd = rd;
  const int half = rd / 2;
  r.freqs.resize(static_cast<size_t>(half));
  const float fb = static_cast<float>(base);
  for (int i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(rd);
    r.freqs[i] = 1.0f / std::pow(fb, e);
  }
  if (original_seq_len > 0) {
    auto corr = [&](double rot) {
      return rd * std::log(original_seq_len / (rot * 2 * M_PI)) / (2 * std::log(base));
    };
    const double low = std::max(std::floor(corr(beta_fast)), 0.0);
    const double high = std::min(std::ceil(corr(beta_slow)), static_cast<double>(rd - 1));
    const float denom = static_cast<float>(std::max(high - low, 1e-3));
    const float ff = static_cast<float>(factor);
    for (int i = 0; i < half; ++i) {
      const float ramp = std::clamp((static_cast<float>(i) - static_cast<float>(low)) / denom, 0.0f, 1.0f);
      const float smooth = 1.0f - ramp;
      r.freqs[i] = r.freqs[i] / ff * (1.0f - smooth) + r.freqs[i] * smooth;
    }
  }
  return r;
}

void Rope::apply(float* x, int64_t n_rows, int64_t row_len, int64_t pos, bool inverse) const {
  const int half = rd / 2;
  float cs[512], sn[512];
  for (int i = 0; i < half; ++i) {
    const float ang = static_cast<float>(pos) * freqs[i];
    // f32 cos/sin of the f32 angle (what torch.polar calls), not a rounded double: they differ
    // by an ulp on some angles (deep/s48 position 34), enough to move a bf16 rounding.
    cs[i] = std::cos(ang);
    sn[i] = std::sin(ang);
    if (inverse) sn[i] = -sn[i];
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    float* v = x + r * row_len + (row_len - rd);
    for (int i = 0; i < half; ++i) {
      const float a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = bf16r(a * cs[i] - b * sn[i]);
      v[2 * i + 1] = bf16r(a * sn[i] + b * cs[i]);
    }
  }
}

}  // namespace strata::v41
