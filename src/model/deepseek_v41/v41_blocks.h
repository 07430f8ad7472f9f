// Scalar building blocks of the V4.1 forward that carry the reference's exact rounding, split
// out of the forward (v41_attention.cpp, v41_forward.cpp) so each has a unit test against the
// equations (tests/model/v41_*).
//
//   pool_ratio2   ratio-2 compressor pooling: per channel d, w = softmax(g0[d], g1[d]) (f32),
//                 out[d] = bf16(kv0[d]*w0 + kv1[d]*w1). (Ratio 1 has no pooling: the latent is
//                 RMSNorm(wkv x), see v41_attention.cpp compress().)
//   attend_head   one head of the sparse attention kernel: s_j = (q.k_j)*scale (f32; q.k_j summed
//                 in the BLAS order, dot_f32_blas: the reference's f32 einsum runs one
//                 [heads x hd] x [hd x keys] sgemm per query; small_kernel =
//                 f32_gemm_small(keys, hd, heads), e.g. up to 300 keys with 4 heads);
//                 m = max_j s_j (the sink is not part of the max); p_j = exp(s_j - m);
//                 den = torch_sum_f32(p) + exp(sink - m); out = bf16(sum_j bf16(p_j) k_j / den) (K = V).
//   hc_collapse   u = bf16(sum_c w[c] H[c])          (a sub-layer's input from the hc streams)
//   hc_post       H[t] = bf16(post[t] y + sum_s comb[s][t] R[s]), R = the streams before the
//                 sub-layer. Single-pass hand-off (deepseek-v4.md §4.4): the w collapsing a
//                 sub-layer's input is the *previous* site's pre; post/comb are this site's own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/deepseek4/ds4_mhc.h"

namespace strata::v41 {

void pool_ratio2(const float* kv0, const float* g0, const float* kv1, const float* g1, int64_t n, float* out);

void attend_head(const float* q, const float* const* keys, size_t n_keys, int hd, float scale, float sink,
                 bool small_kernel, float* out);

// pre/post/comb of one mHC site from its mixes, with the reference's arithmetic:
// logits = base + mixes*scale; pre = sigmoid + eps, post = 2 sigmoid (1/(1+std::exp(-x)));
// comb rows: e = torch_vec_expf(x - max), sum left to right, e / sum + eps; then columns
// / (sum + eps), then (iters - 1) x {rows / (sum + eps), columns / (sum + eps)}; all f32.
// (std::exp in the softmax, or e * (1/sum), or a double sum each break wide/s48 bit-exactness.)
void hc_site_coeffs(const float* mixes, const float* scale, const float* base, int hc, int iters, float eps,
                    ds4::HcCoeffs* out);
void hc_collapse(const float* H, const float* w, int hc, int64_t dim, float* u);
void hc_post(const ds4::HcCoeffs& co, const float* y, int hc, int64_t dim, float* H);

}  // namespace strata::v41
