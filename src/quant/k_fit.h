// The scale-and-min fits of the 256-element K-quants with a per-sub-block min (Q4_K, Q5_K), as
// llama-quantize's reference quantizers do them (byte-exact without an importance matrix), and
// with caller-given weights (an importance matrix, quant/weighted_quant.h).
#pragma once

#include <cstdint>

namespace strata {

// Fits x[0..n) ≈ scale·L − m with L in [0, nmax] and m >= 0 minimising Σ w·error²: first the
// min/max grid, then nstep+1 grids of nmax + rmin + rdelta·k levels over [min(x, 0), max(x)],
// each with its least-squares (scale, min). L: the winner's levels; *neg_min = m. Returns
// the scale (0 for a constant group).
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                    float rdelta, int nstep);

// One Q4_K (nmax 15) or Q5_K (nmax 31) super-block of 256 from its 8 fitted sub-block scales and
// mins and levels L (levels of sub-blocks whose quantized scale is 0 are kept): 6-bit scales and
// mins against the largest ones, then every level re-rounded to the stored scale and min.
// Writes d, dmin, scales[12] and returns the final levels in L.
void k_pack_scales_and_levels(const float* x, const float scales[8], const float mins[8], int nmax,
                              uint16_t* d, uint16_t* dmin, uint8_t packed[12], uint8_t L[256]);

// Weighted versions for an importance matrix: qw[0..256) per element (>= 0).
void quantize_block_q4_k_weighted(const float* x, const float* qw, void* block);
void quantize_block_q5_k_weighted(const float* x, const float* qw, void* block);

// Without an importance matrix: llama-quantize's Q4_K weights (quantize_row_q4_K_ref).
void quantize_weights_q4_k(const float* src, void* dst, int64_t n);

}  // namespace strata
