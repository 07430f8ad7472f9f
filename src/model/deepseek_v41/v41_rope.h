// RoPE as the V4.1 reference computes it (PyTorch precompute_freqs_cis + apply_rotary_emb):
//   f_i = 1 / base^((2i)/rd) in f32, i < rd/2; YaRN (original_seq_len > 0):
//     low = max(floor(corr(beta_fast)), 0), high = min(ceil(corr(beta_slow)), rd-1),
//     corr(r) = rd*ln(orig/(2*pi*r)) / (2 ln base); ramp_i = clamp((i-low)/max(high-low, 1e-3), 0, 1);
//     f_i <- f_i/factor*(1-smooth_i) + f_i*smooth_i, smooth_i = 1 - ramp_i   (no magnitude scale)
//   angle = float(pos) * f_i (f32); cos/sin = std::cos/std::sin of that f32 angle (f32 libm, as
//   torch.polar; a correctly rounded double-then-float differs by an ulp on some angles); pairs (x[2i],
//   x[2i+1]) of the LAST rd dims rotated as complex numbers in f32, the result rounded to bf16. Inverse =
//   rotation by the conjugate.
// Window-only layers use rope_theta without YaRN; compressed layers compress_rope_theta + YaRN.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::v41 {

struct Rope {
  int rd = 0;
  std::vector<float> freqs;  // [rd/2]

  static Rope make(int rd, double base, int original_seq_len, double factor, int beta_fast, int beta_slow);
  // Rotates the last rd dims of n_rows rows of row_len floats at position pos; rounds to bf16.
  void apply(float* x, int64_t n_rows, int64_t row_len, int64_t pos, bool inverse) const;
};

}  // namespace strata::v41
