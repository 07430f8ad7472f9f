#include "kernels/expert_ffn.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "base/assert.h"
#include "base/parallel.h"
#include "kernels/activation_tap.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/traits.h"

namespace strata {

namespace {

// Output rows per work item. Gate/up items also quantize their slice of the activation for down,
// so their row count is a multiple of down's vec_dot_type block (256 for Q8_K). Down items take
// twice as many rows (half the per-call activation setup of the decode gemv kernels); the
// per-thread scratch holds max(2·rb1, kDownRows) rows per slot either way.
constexpr int64_t kRowsPerItem = 64;
constexpr int64_t kDownRows = 2 * kRowsPerItem;

// y[t·ldy + (r − r0)] = W_r · x[t] for r in [r0, r1), t < m; x[t] are activation rows in W's
// vec_dot_type (f32 weights: f32 rows, dot_f32 as linear() does).
void rows_product(const ExpertMat& w, int64_t r0, int64_t r1, const void* const* x, int64_t m, float* y,
                  int64_t ldy) {
  const uint8_t* base = w.data + static_cast<size_t>(r0) * w.nb1;
  if (w.type == GgmlType::f32) {
    for (int64_t r = 0; r < r1 - r0; ++r) {
      const float* wr = reinterpret_cast<const float*>(base + static_cast<size_t>(r) * w.nb1);
      for (int64_t t = 0; t < m; ++t) y[t * ldy + r] = dot_f32(wr, static_cast<const float*>(x[t]), w.in);
    }
    return;
  }
  matmul_rows_gather(kernel_traits(w.type), w.in, base, w.nb1, 0, r1 - r0, x, m, y, ldy);
}

// Activation rows of x [n][d] in type t: f32 rows are x itself, others are converted once into
// the arena. Returns the first row; *stride = bytes between rows.
const uint8_t* convert_rows(GgmlType t, const float* x, int64_t n, int64_t d, Arena& arena, size_t* stride) {
  if (t == GgmlType::f32) {
    *stride = sizeof(float) * static_cast<size_t>(d);
    return reinterpret_cast<const uint8_t*>(x);
  }
  const KernelTraits& vt = kernel_traits(t);
  STRATA_ASSERT(vt.from_float != nullptr);
  *stride = row_bytes(t, d);
  uint8_t* buf = arena.alloc<uint8_t>(*stride * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) vt.from_float(x + i * d, buf + static_cast<size_t>(i) * *stride, d);
  return buf;
}

void phase_gate_up(const ExpertFfn& s, int e, int64_t r0, int64_t r1, int ti) {
  const int64_t o = s.off[e], m = s.off[e + 1] - o, nr = r1 - r0;
  float* g = s.tbuf + ti * s.tstride;
  float* u = g + m * s.rb1;
  rows_product(s.gate[e], r0, r1, s.xg + o, m, g, s.rb1);
  rows_product(s.up[e], r0, r1, s.xu + o, m, u, s.rb1);
  const KernelTraits& hk = kernel_traits(s.ht);
  const size_t hoff = row_bytes(s.ht, r0);
  ActivationTap* tap = activation_tap();
  if (tap && r0 == 0) {
    for (int64_t i = 0; i < m; ++i) {
      const float* xt = s.x + static_cast<int64_t>(s.slots[o + i] / s.K) * s.d;
      tap->on_expert(s.gate[e].data, xt, 0, s.d, true);
      tap->on_expert(s.up[e].data, xt, 0, s.d, true);
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    float* gi = g + i * s.rb1;
    float* ui = u + i * s.rb1;
    if (s.gate_b)
      for (int64_t j = 0; j < nr; ++j) gi[j] += s.gate_b[e * s.F + r0 + j];
    if (s.up_b)
      for (int64_t j = 0; j < nr; ++j) ui[j] += s.up_b[e * s.F + r0 + j];
    if (s.act == ExpertAct::expert_act_swiglu_oai) {
      swiglu_oai(gi, ui, gi, nr, s.alpha, s.limit);
    } else if (s.act == ExpertAct::expert_act_swiglu_clamped && s.limit > 0.0f) {
      swiglu_clamped(gi, ui, gi, nr, s.limit);
    } else {
      swiglu(gi, ui, gi, nr);
    }
    if (tap) tap->on_expert(s.down[e].data, gi, r0, nr, r0 == 0);
    uint8_t* dst = s.hq + static_cast<size_t>(s.slots[o + i]) * s.hrow + hoff;
    if (s.ht == GgmlType::f32) {
      std::memcpy(dst, gi, sizeof(float) * static_cast<size_t>(nr));
    } else {
      hk.from_float(gi, dst, nr);
    }
  }
}

void phase_down(const ExpertFfn& s, int e, int64_t r0, int64_t r1, int ti) {
  const int64_t o = s.off[e], m = s.off[e + 1] - o, nr = r1 - r0;
  float* y = s.tbuf + ti * s.tstride;
  rows_product(s.down[e], r0, r1, s.hp + o, m, y, kDownRows);
  const float* b = s.down_b ? s.down_b + e * s.d + r0 : nullptr;
  for (int64_t i = 0; i < m; ++i) {
    const int32_t slot = s.slots[o + i];
    float* yi = y + i * kDownRows;
    if (b)
      for (int64_t j = 0; j < nr; ++j) yi[j] += b[j];
    float* dst = s.y + int64_t{slot} * s.d + r0;
    if (s.wts) {
      const float wt = s.wts[slot];
      for (int64_t j = 0; j < nr; ++j) dst[j] = yi[j] * wt;
    } else {
      std::memcpy(dst, yi, sizeof(float) * static_cast<size_t>(nr));
    }
  }
}

}  // namespace

ExpertMat expert_mat(const TensorView& v, int64_t e) {
  return {v.row(0, e), v.nb[1], v.ne[0], v.type};
}

void expert_ffn_run(const ExpertFfnJob* jobs, int n_jobs, ThreadPool& pool) {
  constexpr int kMaxJobs = kMaxExpertFfnJobs;
  STRATA_ASSERT(n_jobs >= 1 && n_jobs <= kMaxJobs);
  int64_t work = 0, nb1[kMaxJobs], nb2[kMaxJobs], first1[kMaxJobs + 1], first2[kMaxJobs + 1];
  first1[0] = 0;
  for (int j = 0; j < n_jobs; ++j) {
    const ExpertFfn& s = *jobs[j].s;
    for (int i = 0; i < jobs[j].n; ++i) {
      const int e = jobs[j].experts[i];
      work += (s.off[e + 1] - s.off[e]) * 3 * s.F * s.d;
      s.done1[i].store(0, std::memory_order_relaxed);
    }
    nb1[j] = (s.F + s.rb1 - 1) / s.rb1;
    nb2[j] = (s.d + kDownRows - 1) / kDownRows;
    first1[j + 1] = first1[j] + jobs[j].n * nb1[j];
  }
  // Down items of kDownRows rows, except those of the region's last expert: kRowsPerItem rows, so
  // the region ends on small items.
  auto down_rows = [&](int j, int64_t i) {
    return j == n_jobs - 1 && i == jobs[j].n - 1 ? kRowsPerItem : kDownRows;
  };
  first2[0] = first1[n_jobs];
  for (int j = 0; j < n_jobs; ++j) {
    const int64_t d = jobs[j].s->d, n = jobs[j].n;
    first2[j + 1] =
        first2[j] + (n > 0 ? (n - 1) * nb2[j] + (d + down_rows(j, n - 1) - 1) / down_rows(j, n - 1) : 0);
  }
  const bool par = pool.size() > 1 && work >= kMinParallelWork;
  parallel_items(pool, first2[n_jobs], par, [&](int64_t item, int ti) {
    int j = 0;
    if (item < first1[n_jobs]) {
      while (item >= first1[j + 1]) ++j;
      const ExpertFfn& s = *jobs[j].s;
      const int64_t i = (item - first1[j]) / nb1[j], r0 = (item - first1[j]) % nb1[j] * s.rb1;
      phase_gate_up(s, jobs[j].experts[i], r0, std::min(s.F, r0 + s.rb1), ti);
      count_done(s.done1[i]);
      return;
    }
    while (item >= first2[j + 1]) ++j;
    const ExpertFfn& s = *jobs[j].s;
    const int64_t i = std::min<int64_t>((item - first2[j]) / nb2[j], jobs[j].n - 1), rows = down_rows(j, i);
    const int64_t r0 = (item - first2[j] - i * nb2[j]) * rows;
    wait_count(s.done1[i], static_cast<int32_t>(nb1[j]));
    phase_down(s, jobs[j].experts[i], r0, std::min(s.d, r0 + rows), ti);
  });
}

void expert_ffn_prepare(ExpertFfn& s, const ExpertMat& gate, const ExpertMat& up, const ExpertMat& down,
                        const float* x, int64_t n, int K, int n_groups, int n_threads, Arena& arena) {
  const int64_t n_slots = n * K, d = s.d;
  s.x = x;
  s.K = K;
  const GgmlType gt = kernel_traits(gate.type).vec_dot_type, ut = kernel_traits(up.type).vec_dot_type;
  s.ht = kernel_traits(down.type).vec_dot_type;
  STRATA_ASSERT(gate.in == d && up.in == d && down.in == s.F);
  size_t gs = 0, us = 0;
  const uint8_t* xg = convert_rows(gt, x, n, d, arena, &gs);
  const uint8_t* xu = ut == gt ? xg : convert_rows(ut, x, n, d, arena, &us);
  if (ut == gt) us = gs;
  s.hrow = row_bytes(s.ht, s.F);
  s.hq = arena.alloc<uint8_t>(s.hrow * static_cast<size_t>(n_slots));
  s.xg = arena.alloc<const void*>(n_slots);
  s.xu = arena.alloc<const void*>(n_slots);
  s.hp = arena.alloc<const void*>(n_slots);
  for (int64_t i = 0; i < n_slots; ++i) {
    const int64_t slot = s.slots[i], t = slot / K;
    s.xg[i] = xg + static_cast<size_t>(t) * gs;
    s.xu[i] = xu + static_cast<size_t>(t) * us;
    s.hp[i] = s.hq + static_cast<size_t>(slot) * s.hrow;
  }
  const int64_t bs = type_info(s.ht).block_size;
  s.rb1 = bs > kRowsPerItem ? bs : kRowsPerItem;
  STRATA_ASSERT(s.rb1 % bs == 0 && s.F % bs == 0);
  int64_t max_m = 0;
  for (int e = 0; e < n_groups; ++e) max_m = std::max<int64_t>(max_m, s.off[e + 1] - s.off[e]);
  s.tstride = max_m * std::max(2 * s.rb1, kDownRows);
  s.tbuf = arena.alloc<float>(static_cast<size_t>(n_threads * s.tstride));
  s.done1 = arena.alloc<std::atomic<int32_t>>(static_cast<size_t>(n_groups));
  for (int e = 0; e < n_groups; ++e) new (&s.done1[e]) std::atomic<int32_t>(0);
}

void expert_ffn_prepare_dense(ExpertFfn& s, const ExpertMat* mats, const float* x, int64_t n, float* out,
                              int n_threads, Arena& arena) {
  s.d = mats[0].in;
  s.F = mats[2].in;
  int32_t* off = arena.alloc<int32_t>(2);
  off[0] = 0;
  off[1] = static_cast<int32_t>(n);
  int32_t* slots = arena.alloc<int32_t>(n);
  for (int64_t t = 0; t < n; ++t) slots[t] = static_cast<int32_t>(t);
  s.off = off;
  s.slots = slots;
  s.gate = &mats[0];
  s.up = &mats[1];
  s.down = &mats[2];
  s.y = out;
  expert_ffn_prepare(s, mats[0], mats[1], mats[2], x, n, 1, 1, n_threads, arena);
}

void ffn_swiglu_forward(const TensorView& gate, const TensorView& up, const TensorView& down, const float* x,
                        int64_t n, float* out, ThreadPool& pool, Arena& arena) {
  if (n <= 0) return;
  STRATA_ASSERT(down.ne[1] == gate.ne[0] && up.ne[1] == gate.ne[1] && down.ne[0] == gate.ne[1]);
  const size_t mk = arena.mark();
  ExpertFfn s;
  const ExpertMat mats[3] = {expert_mat(gate), expert_mat(up), expert_mat(down)};
  expert_ffn_prepare_dense(s, mats, x, n, out, pool.size(), arena);
  static constexpr int32_t kOnly = 0;
  const ExpertFfnJob job{&s, &kOnly, 1};
  expert_ffn_run(&job, 1, pool);
  arena.rewind(mk);
}

}  // namespace strata
