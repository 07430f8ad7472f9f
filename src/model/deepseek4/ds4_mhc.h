// mHC — Manifold-Constrained Hyper-Connections of DeepSeek-V4 (deepseek-v4.md §2.2).
//
// A token's residual is hc streams H [hc][d] (hc = 4). Each layer has two sites (attention,
// FFN) with fn [n_mix][hc*d] (row-major, GGUF {hc*d, n_mix}), base [n_mix], scale [3],
// n_mix = (2+hc)*hc = 24. Per token and site:
//   r = H.flat / rms(H.flat)                         (unweighted RMSNorm over hc*d values)
//   m = fn . r                                       (n_mix mixing logits)
//   pre[i]  = sigmoid(scale0*m[i] + base[i]) + hc_eps
//   post[i] = 2*sigmoid(scale1*m[hc+i] + base[hc+i])
//   C[s][t] = scale2*m[2hc + hc*s + t] + base[...]   (s = source stream, t = destination)
//   C = Sinkhorn(C): softmax over t, + hc_eps, column-normalise, then (iters-1) x {row, column}
//   sub-layer input u = sum_i pre[i] * H[i];   after the sub-layer (output y):
//   H'[t] = post[t]*y + sum_s C[s][t]*H[s]
// Final collapse (hc_head): p[i] = sigmoid(scale*(fn_head . r)[i] + base[i]) + hc_eps,
// h = sum_i p[i]*H[i].
#pragma once

#include <cstdint>

namespace strata::ds4 {

constexpr int kHcMax = 4;  // llama.cpp asserts hc == 4; the loader checks it

struct HcCoeffs {
  float pre[kHcMax];
  float post[kHcMax];
  float comb[kHcMax][kHcMax];  // [source][destination], doubly (approximately) stochastic
};

// m = fn . (H.flat / rms(H.flat)); H [hc][d]; fn [n_mix][hc*d]; mixes [n_mix].
void hc_mixes(const float* H, int hc, int64_t d, const float* fn, int n_mix, float eps, float* mixes);

// Sinkhorn normalisation in place on C [hc][hc] (logits in, mixing matrix out).
void hc_sinkhorn(float* C, int hc, int iters, float hc_eps);

// pre/post/comb from the n_mix logits of one site (scale [3], base [n_mix]).
void hc_coeffs(const float* mixes, const float* scale, const float* base, int hc, int iters, float hc_eps,
               HcCoeffs* out);

// Head weights from hc logits (scale [1], base [hc]): p[i] = sigmoid(scale*m[i]+base[i]) + hc_eps.
void hc_head_weights(const float* mixes, const float* scale, const float* base, int hc, float hc_eps,
                     float* p);

// u[d] = sum_i w[i] * H[i][d]   (sub-layer input or final collapse).
void hc_collapse(const float* H, const float* w, int hc, int64_t d, float* u);

// H_out[t] = post[t]*y + sum_s comb[s][t]*H[s]. H_out must not alias H.
void hc_post(const float* y, const float* H, const HcCoeffs& c, int hc, int64_t d, float* H_out);

}  // namespace strata::ds4
