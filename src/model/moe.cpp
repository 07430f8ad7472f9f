#include "model/moe.h"

#include <algorithm>
#include <cstring>

#include "base/assert.h"
#include "kernels/ops.h"
#include "model/linear.h"

namespace strata {

namespace {

// sel/wts: [n][k]. Router semantics as in the header.
void route(const MoeConfig& c, float* logits, int64_t n, int32_t* sel, float* wts) {
  const int E = c.n_expert, K = c.n_used;
  for (int64_t t = 0; t < n; ++t) {
    float* l = logits + t * E;
    int32_t* s = sel + t * K;
    float* w = wts + t * K;
    if (c.router == MoeRouter::moe_router_topk_softmax) {
      top_k(l, E, K, s);
      for (int j = 0; j < K; ++j) w[j] = l[s[j]];
      softmax_inplace(w, K);
      continue;
    }
    softmax_inplace(l, E);
    top_k(l, E, K, s);
    float sum = 0.0f;
    for (int j = 0; j < K; ++j) {
      w[j] = l[s[j]];
      sum += w[j];
    }
    if (c.router == MoeRouter::moe_router_softmax_topk_renorm) {
      const float d = std::max(sum, 6.103515625e-5f);
      for (int j = 0; j < K; ++j) w[j] /= d;
    }
  }
}

}  // namespace

void ffn_swiglu_forward(const TensorView& gate, const TensorView& up, const TensorView& down, const float* x,
                        int64_t n, float* out, ThreadPool& pool, Arena& arena) {
  const int64_t F = gate.ne[1];
  const size_t m = arena.mark();
  float* g = arena.alloc<float>(n * F);
  float* u = arena.alloc<float>(n * F);
  linear(pool, arena, gate, x, n, g);
  linear(pool, arena, up, x, n, u);
  swiglu(g, u, g, n * F);
  linear(pool, arena, down, g, n, out);
  arena.rewind(m);
}

Status moe_forward(const MoeConfig& c, const MoeWeights& w, const float* x, int64_t n, float* out,
                   ThreadPool& pool, Arena& arena, ExpertSource* experts, int layer) {
  const int E = c.n_expert, K = c.n_used, F = c.n_ff;
  const int64_t d = c.n_embd;
  STRATA_ASSERT(K >= 1 && K <= E);

  float* logits = arena.alloc<float>(n * E);
  linear(pool, arena, *w.gate_inp, x, n, logits, w.gate_inp_b);
  int32_t* sel = arena.alloc<int32_t>(n * K);
  float* wts = arena.alloc<float>(n * K);
  route(c, logits, n, sel, wts);
  if (experts) experts->on_route(layer, x, n, sel, wts, K);

  // Counting sort of (token, slot) pairs by expert.
  int32_t* count = arena.alloc<int32_t>(E + 1);
  std::fill(count, count + E + 1, 0);
  for (int64_t i = 0; i < n * K; ++i) count[sel[i] + 1]++;
  for (int e = 0; e < E; ++e) count[e + 1] += count[e];
  int32_t* order = arena.alloc<int32_t>(n * K);  // flat (t*K + slot) indices grouped by expert
  int32_t* fill = arena.alloc<int32_t>(E);
  std::copy(count, count + E, fill);
  for (int64_t i = 0; i < n * K; ++i) order[fill[sel[i]]++] = static_cast<int32_t>(i);

  float* ybuf = arena.alloc<float>(n * K * d);  // [n][K][d] weighted expert outputs
  float* xe = arena.alloc<float>(n * d);
  float* g = arena.alloc<float>(n * F);
  float* u = arena.alloc<float>(n * F);
  float* ye = arena.alloc<float>(n * d);
  // With an expert source, experts already resident go first (pass 0) while the reads of the
  // others are in flight (pass 1). Outputs land in ybuf per (token, slot), so the order changes
  // no bit of the result.
  uint8_t* done = arena.alloc<uint8_t>(E);
  std::fill(done, done + E, uint8_t{0});
  for (int pass = experts ? 0 : 1; pass < 2; ++pass)
    for (int e = 0; e < E; ++e) {
      const int m = count[e + 1] - count[e];
      if (m == 0 || done[e] || (pass == 0 && !experts->ready(layer, e))) continue;
      done[e] = 1;
      const int32_t* idx = order + count[e];
      for (int i = 0; i < m; ++i) std::memcpy(xe + int64_t{i} * d, x + (idx[i] / K) * d, sizeof(float) * d);
      const size_t mk = arena.mark();
      ExpertViews v;
      if (experts) {
        auto got = experts->acquire(layer, e);
        if (!got.ok()) return got.error();
        v = std::move(got).value();
      } else {
        v = {w.gate_exps->slice2d(e), w.up_exps->slice2d(e), w.down_exps->slice2d(e)};
      }
      const TensorView &gate_e = v.gate, &up_e = v.up, &down_e = v.down;
      linear(pool, arena, gate_e, xe, m, g, w.gate_exps_b ? w.gate_exps_b + int64_t{e} * F : nullptr);
      linear(pool, arena, up_e, xe, m, u, w.up_exps_b ? w.up_exps_b + int64_t{e} * F : nullptr);
      if (c.act == ExpertAct::expert_act_swiglu_oai) {
        swiglu_oai(g, u, g, int64_t{m} * F, c.oai_alpha, c.oai_limit);
      } else {
        swiglu(g, u, g, int64_t{m} * F);
      }
      linear(pool, arena, down_e, g, m, ye, w.down_exps_b ? w.down_exps_b + int64_t{e} * d : nullptr);
      if (experts) experts->release(layer, e);
      arena.rewind(mk);
      for (int i = 0; i < m; ++i) {
        const float wt = wts[idx[i]];
        float* dst = ybuf + int64_t{idx[i]} * d;
        const float* src = ye + int64_t{i} * d;
        for (int64_t j = 0; j < d; ++j) dst[j] = src[j] * wt;
      }
    }
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * d;
    std::memcpy(o, ybuf + t * K * d, sizeof(float) * d);
    for (int s = 1; s < K; ++s) vec_add(o, ybuf + (t * K + s) * d, d);
  }

  if (w.gate_shexp) {
    float* sh = arena.alloc<float>(n * d);
    ffn_swiglu_forward(*w.gate_shexp, *w.up_shexp, *w.down_shexp, x, n, sh, pool, arena);
    for (int64_t t = 0; t < n; ++t) {
      float gate = 1.0f;
      if (w.gate_inp_shexp) {
        // llama.cpp evaluates this sigmoid as silu(z)/z.
        const float z = dot_f32(w.gate_inp_shexp, x + t * d, d);
        gate = z != 0.0f ? silu(z) / z : 0.5f;
      }
      for (int64_t j = 0; j < d; ++j) out[t * d + j] += sh[t * d + j] * gate;
    }
  }
  return {};
}

}  // namespace strata
