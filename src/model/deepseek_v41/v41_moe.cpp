// DeepSeek-V4.1 MoE sub-layer over a batch (v41_step.h): sqrt-softplus router with the noaux_tc
// selection bias (f32, the reference's BLAS order per row), routed experts grouped by expert
// (one pass over each used expert's weights per step), the shared expert over all rows.
// Per row the arithmetic is the reference's: bf16 Linears, weight * silu(clamped) * up rounded
// to bf16, the routed outputs summed in ascending expert id, then the shared expert.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/blocks/moe.h"
#include "model/deepseek4/ds4_moe.h"
#include "model/deepseek_v41/v41_quant.h"
#include "model/deepseek_v41/v41_step.h"

namespace strata::v41 {

namespace {

// One expert (w1 gate, w3 up, w2 down) over m rows X [m][dim] -> Y [m][dim]; weights[i] scales
// row i's activation (null: the shared expert, unweighted).
void expert_rows(Step& s, const Mat& w1, const Mat& w3, const Mat& w2, const float* X, int64_t m,
                 const float* weights, float* Y) {
  const Config& c = s.m.cfg;
  const int64_t I = w1.rows, D = c.dim;
  std::vector<float> g(static_cast<size_t>(m * I)), u(static_cast<size_t>(m * I));
  linear_bf16_rows(s.pool, w1.w.data(), I, D, X, D, m, g.data(), I);
  linear_bf16_rows(s.pool, w3.w.data(), I, D, X, D, m, u.data(), I);
  const float lim = c.swiglu_limit;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < I; ++i) {
      float gi = g[r * I + i], ui = u[r * I + i];
      if (lim > 0) {
        ui = std::clamp(ui, -lim, lim);
        gi = std::min(gi, lim);
      }
      float a = gi / (1.0f + std::exp(-gi)) * ui;
      if (weights) a = weights[r] * a;
      g[r * I + i] = bf16r(a);
    }
  linear_bf16_rows(s.pool, w2.w.data(), D, I, g.data(), I, m, Y, D);
}

// Router of one row: scores [E] (the gate's logits) -> ids [K] (by biased score, ties to the lower
// id) and their weights [K].
void route(const Config& c, const LayerW& L, float* sc, int* ids_out, float* wts) {
  const int E = c.n_experts, K = c.n_active;
  for (int e = 0; e < E; ++e) {
    const float v = sc[e] / c.gate_temp;
    const float sp = v > 20.0f ? v : std::log1p(std::exp(v));
    sc[e] = std::sqrt(sp);
  }
  std::vector<int> ids(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) ids[e] = e;
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int a, int b) { return sc[a] + L.gate_bias[a] > sc[b] + L.gate_bias[b]; });
  float sum = 0.0f;
  for (int i = 0; i < K; ++i) sum += (wts[i] = sc[ids[i]]);
  for (int i = 0; i < K; ++i) {
    if (c.norm_topk && K > 1) wts[i] /= sum;
    wts[i] *= c.route_scale;
    ids_out[i] = ids[i];
  }
}

}  // namespace

void moe_layer(Step& s, int l, const float* x, float* y) {
  const Config& c = s.m.cfg;
  const LayerW& L = s.m.w.layers[l];
  const int64_t n = s.n(), D = c.dim, E = c.n_experts, K = c.n_active;
  std::vector<float> sc(static_cast<size_t>(n * E)), wts(static_cast<size_t>(n * K));
  std::vector<int> ids(static_cast<size_t>(n * K));
  linear_f32_rows(s.pool, L.gate.w.data(), E, D, x, D, n, s.s_ref.data(), sc.data(), E);
  for (int64_t r = 0; r < n; ++r) route(c, L, sc.data() + r * E, ids.data() + r * K, wts.data() + r * K);
  // Routed experts grouped by expert: each used expert's rows gathered, run once, and its outputs
  // kept per (row, slot) until every row sums its own in ascending expert id.
  std::vector<float> ys(static_cast<size_t>(n * K * D)), xe, ye, we;
  std::vector<int64_t> slots;  // r * K + k of the rows routed to the current expert
  for (int64_t e = 0; e < E; ++e) {
    slots.clear();
    for (int64_t i = 0; i < n * K; ++i)
      if (ids[i] == e) slots.push_back(i);
    if (slots.empty()) continue;
    const int64_t m = static_cast<int64_t>(slots.size());
    xe.resize(static_cast<size_t>(m * D));
    ye.resize(static_cast<size_t>(m * D));
    we.resize(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(x + slots[i] / K * D, D, xe.data() + i * D);
      we[i] = wts[slots[i]];
    }
    expert_rows(s, L.w1[e], L.w3[e], L.w2[e], xe.data(), m, we.data(), ye.data());
    for (int64_t i = 0; i < m; ++i) std::copy_n(ye.data() + i * D, D, ys.data() + slots[i] * D);
  }
  std::vector<float> sh(static_cast<size_t>(n * D)), acc(static_cast<size_t>(D));
  expert_rows(s, L.sw1, L.sw3, L.sw2, x, n, nullptr, sh.data());
  std::vector<int64_t> order(static_cast<size_t>(K));
  for (int64_t r = 0; r < n; ++r) {
    const int* ri = ids.data() + r * K;
    for (int64_t k = 0; k < K; ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ri[a] < ri[b]; });
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t k : order) {
      const float* yk = ys.data() + (r * K + k) * D;
      for (int64_t d = 0; d < D; ++d) acc[d] += yk[d];
    }
    for (int64_t d = 0; d < D; ++d) y[r * D + d] = bf16r(acc[d] + sh[r * D + d]);
  }
}

Status moe_layer_fast(Step& s, int l, const float* x, float* y) {
  const Config& c = s.m.cfg;
  const LayerW& L = s.m.w.layers[l];
  const int64_t n = s.n(), E = c.n_experts, K = c.n_active;
  std::vector<float> sc(static_cast<size_t>(n * E)), wts(static_cast<size_t>(n * K));
  std::vector<int32_t> ids(static_cast<size_t>(n * K));
  lin(s, L.gate, x, n, sc.data(), s.s_ref.data());  // the router is an f32 Linear
  for (int64_t r = 0; r < n; ++r) {
    float* z = sc.data() + r * E;
    for (int64_t e = 0; e < E; ++e) z[e] /= c.gate_temp;
    ds4::sqrt_softplus_scores(z, static_cast<int>(E), z);
    ds4::route_topk(z, L.gate_bias.data(), static_cast<int>(E), static_cast<int>(K), c.norm_topk && K > 1,
                    c.route_scale, ids.data() + r * K, wts.data() + r * K);
  }
  MoeConfig mc;
  mc.n_embd = c.dim;
  mc.n_expert = static_cast<int>(E);
  mc.n_used = static_cast<int>(K);
  mc.n_ff = static_cast<int>(L.xw1.rows);
  mc.n_ff_shexp = static_cast<int>(L.sw1.rows);
  mc.act = mc.shexp_act = ExpertAct::expert_act_swiglu_clamped;  // L <= 0: plain SwiGLU
  mc.clamp = mc.shexp_clamp = c.swiglu_limit;
  MoeWeights mw;
  mw.gate_exps = &L.xw1.tv;
  mw.up_exps = &L.xw3.tv;
  mw.down_exps = &L.xw2.tv;
  mw.gate_shexp = &L.sw1.tv;
  mw.up_shexp = &L.sw3.tv;
  mw.down_shexp = &L.sw2.tv;
  Arena& a = s.sc.arena;
  const size_t mark = a.mark();
  if (s.experts) s.experts->on_route(l, x, n, ids.data(), wts.data(), static_cast<int>(K));
  const Status st = moe_experts_forward(mc, mw, x, n, ids.data(), wts.data(), y, s.pool, a, s.experts, l);
  a.rewind(mark);
  STRATA_TRY(st);
  for (int64_t i = 0; i < n * c.dim; ++i) y[i] = bf16r(y[i]);
  return {};
}

}  // namespace strata::v41
