// Numerics of the DeepSeek-V4.1 reference (PyTorch, bf16 activations) reproduced in f32:
//   bf16r(x)           — round an f32 to the nearest bf16 (what `.to(torch.bfloat16)` does);
//   fake_quant_fp8     — per-32 block: s = ue8m0_ceil(max(amax, 1e-4) * (1/448)),
//                        x <- e4m3(clamp(x/s, ±448)) * s         (window KV);
//   fake_quant_fp4     — per-32 block: s = ue8m0_ceil(max(amax, 6*2^-126) * (1/6)),
//                        x <- e2m1(clamp(x/s, ±6)) * s           (indexer q / keys, MXFP4-like);
//   fake_quant_fp4_e4m3 — per-16 block: s = ue4m3(clamp(amax * (1/6), 2^-9, 448)),
//                        x <- e2m1(clamp(x/s, ±6)) * s           (compressed KV, NVFP4-like).
// The element roundings (e4m3_round, e2m1_round, ue4m3_round: nearest, ties to even) and the
// UE8M0 scale (ue8m0_ceil) are quant/fp8_fp4.h's.
// All results are bf16-representable and returned rounded to bf16 like the reference.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "quant/fp8_fp4.h"

namespace strata::v41 {

inline float bf16r(float x) {
  return bf16_to_f32(f32_to_bf16(x));
}

void fake_quant_fp8(float* x, int64_t n, int block = 32);
void fake_quant_fp4(float* x, int64_t n, int block = 32);
void fake_quant_fp4_e4m3(float* x, int64_t n, int block = 16);

// y[o] = bf16r(sum_i W[o][i] * x[i]) — a bf16 Linear / matmul / einsum as torch's CPU kernel
// (oneDNN, VDPBF16PS) computes it: one f32 accumulator, per input pair (2k, 2k+1) the product of
// 2k+1 added first, then that of 2k (bf16 x bf16 products are exact in f32), then one rounding.
// Measured bit-identical to F.linear and to the grouped wo_a einsum on bf16 tensors (plain input
// order, and exact-then-round, each differ near ties: e.g. deep layer 4's wo_a at position 0).
// W [n_out][n_in] f32 holding bf16 values.
void linear_bf16(const float* W, const float* x, int64_t n_out, int64_t n_in, float* y);
// exp as the reference's torch build computes it on vectors (Vectorized<float>::exp, a Sleef
// u10 kernel): x = q ln2 + s with q = rint(x / ln2) (ln2 split in two for the reduction), a
// degree-6 polynomial in s evaluated with FMAs, then scaled by 2^q; 0 below -104, +inf above 100.
// Within 1 ulp of exp but not correctly rounded, so it differs from std::exp on a fair share of
// inputs (measured bit-identical to torch.exp on 3M f32 inputs in [-104, 90]). Torch uses it for
// the vectorized parts of its softmax / sigmoid / silu kernels; scalar tails use std::exp.
float torch_vec_expf(float x);

// An f32 Linear (F32 weights or float32 activations: mHC mixes, ratio-2 compressor, router, head)
// summed in the order of the reference's BLAS (OpenBLAS sgemm, SkylakeX kernels; torch calls it
// transposed: BLAS M = n_out, N = the tokens of the forward, K = n_in). Which kernel runs depends
// on the token count `s_ref` of the reference forward the row belongs to:
//   small-matrix kernel (K >= 32, n_out*s_ref <= 1200, n_out*s_ref*K <= 1e6): 16 f32 lanes, lane l
//     FMA-accumulates x[k]*w[k] over k = l (mod 16) in order; then per group of four lanes
//     (l0+l1)+(l2+l3), and the four group sums (g0+g1)+(g2+g3);
//   otherwise the blocked kernel: one FMA chain over each K block (256, or a balanced half-split
//     when K is between 256 and 512), block results added in order.
// Measured bit-identical to torch 1.13 F.linear on OpenBLAS 0.3.21 (OPENBLAS_CORETYPE=SkylakeX) for
// the fixtures' shapes (K 128/512, n_out 4..256, tokens 1..160); the reference logits of rows 0-3
// reproduce exactly with it.
inline constexpr int64_t kF32GemmQ = 256;
// One output element, sum_k a[k]*b[k], in the order of the small (true) or blocked kernel.
float dot_f32_blas(const float* a, const float* b, int64_t n, bool small);
bool f32_gemm_small(int64_t n_out, int64_t n_in, int64_t s_ref);
void linear_f32(const float* W, const float* x, int64_t n_out, int64_t n_in, int64_t s_ref, float* y);
// The rows of a batch through one pass over W, each output bit-identical to the one-row call:
// Y[r*ldy + o] = linear_bf16 / linear_f32 of X[r*ldx ..] (s_ref[r]: that row's reference
// forward). Each weight row is read once for all rows; the outputs are split over the pool.
void linear_bf16_rows(ThreadPool& pool, const float* W, int64_t n_out, int64_t n_in, const float* X,
                      int64_t ldx, int64_t n_rows, float* Y, int64_t ldy);
void linear_f32_rows(ThreadPool& pool, const float* W, int64_t n_out, int64_t n_in, const float* X,
                     int64_t ldx, int64_t n_rows, const int64_t* s_ref, float* Y, int64_t ldy);
// torch.sum over n contiguous f32 as torch 1.13's CPU kernel (AVX2) orders it: 8-lane vectors;
// four vector accumulators, accumulator k taking vectors k, k+4, k+8, ... (a cascade of levels
// every 16 rows for long inputs); leftover whole vectors into accumulator 0; accumulators folded
// left to right; then 0 + the scalar tail + the 8 lanes, left to right. n < 8: one running sum.
// Measured equal to torch.sum for n = 32..5120 (the rms of the mHC mixes over hc*dim = 512
// differs from a double sum by an ulp often enough to flip sparse/s48 row 5 and deep/s48 row 33).
float torch_sum_f32(const float* x, int64_t n);
// mean(x^2) as torch computes x.square().mean(-1): torch_sum_f32 of the squares / n.
float torch_mean_sq_f32(const float* x, int64_t n);
// RMSNorm of the reference: y = bf16r(w * (x * rsqrt(mean(x^2) + eps))), all in f32, the mean
// being torch_mean_sq_f32.
void rms_norm_bf16(const float* x, const float* w, int64_t n, float eps, float* y);

}  // namespace strata::v41
