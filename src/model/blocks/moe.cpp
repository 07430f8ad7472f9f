#include "model/blocks/moe.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "base/assert.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/traits.h"
#include "model/blocks/linear.h"

namespace strata {

namespace {

// Output rows per work item. Gate/up items also quantize their slice of the activation for down,
// so their row count is a multiple of down's vec_dot_type block (256 for Q8_K). Down items take
// twice as many rows (half the per-call activation setup of the decode gemv kernels); the
// per-thread scratch holds max(2·rb1, kDownRows) rows per slot either way.
constexpr int64_t kRowsPerItem = 64;
constexpr int64_t kDownRows = 2 * kRowsPerItem;

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

// One expert matrix {in, out}: rows `nb1` bytes apart (a trivially copyable TensorView subset,
// so per-expert tables live in the arena).
struct Mat {
  const uint8_t* data = nullptr;
  size_t nb1 = 0;
  int64_t in = 0;
  GgmlType type = GgmlType::f32;
};
Mat mat_of(const TensorView& v, int64_t e = 0) {
  return {v.row(0, e), v.nb[1], v.ne[0], v.type};
}

// y[t·ldy + (r − r0)] = W_r · x[t] for r in [r0, r1), t < m; x[t] are activation rows in W's
// vec_dot_type (f32 weights: f32 rows, dot_f32 as linear() does).
void rows_product(const Mat& w, int64_t r0, int64_t r1, const void* const* x, int64_t m, float* y,
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

// The routed (or dense) SwiGLU FFN of one step, grouped by expert. Slot s = t·K + k (token t's
// k-th choice); slots[off[e] .. off[e+1]) are expert e's slots in token order, and every array
// indexed "grouped" follows that order. For each expert e and each of its slots s:
//   h_s = act(gate_e·x_t + gb_e, up_e·x_t + ub_e) → quantized to down's vec_dot_type (hq row s)
//   ybuf[s] = wt_s · (down_e·h_s + db_e)
// Phase 1 (gate, up, act, quantize) and phase 2 (down) share one pool region, work items
// (expert, block of rows): each expert's weights stream once per step whatever the batch, and
// every output element is the same kernel call whatever the grouping (streamed == resident).
struct ExpertStep {
  int64_t d = 0, F = 0;
  ExpertAct act = ExpertAct::expert_act_swiglu;
  float alpha = 0.0f, limit = 0.0f;
  const int32_t* off = nullptr;    // [E + 1]
  const int32_t* slots = nullptr;  // grouped
  const void** xg = nullptr;       // grouped: gate input row of the slot's token
  const void** xu = nullptr;       // grouped: up input row
  const void** hp = nullptr;       // grouped: hq row of the slot
  uint8_t* hq = nullptr;           // [n_slots][hrow] by slot
  size_t hrow = 0;
  GgmlType ht = GgmlType::f32;  // down's vec_dot_type
  const float* wts = nullptr;   // [n_slots] or null (weight 1)
  const float* gate_b = nullptr;
  const float* up_b = nullptr;
  const float* down_b = nullptr;
  const Mat* gate = nullptr;  // [E], filled for the experts computed
  const Mat* up = nullptr;
  const Mat* down = nullptr;
  float* ybuf = nullptr;  // [n_slots][d] by slot
  float* tbuf = nullptr;  // per-thread scratch, tstride floats each
  int64_t tstride = 0;
  int64_t rb1 = kRowsPerItem;  // phase-1 rows per item
  // [n_groups]: phase-1 items finished, per position in run_experts' list
  std::atomic<int32_t>* done1 = nullptr;
};

void phase_gate_up(const ExpertStep& s, int e, int64_t r0, int64_t r1, int ti) {
  const int64_t o = s.off[e], m = s.off[e + 1] - o, nr = r1 - r0;
  float* g = s.tbuf + ti * s.tstride;
  float* u = g + m * s.rb1;
  rows_product(s.gate[e], r0, r1, s.xg + o, m, g, s.rb1);
  rows_product(s.up[e], r0, r1, s.xu + o, m, u, s.rb1);
  const KernelTraits& hk = kernel_traits(s.ht);
  const size_t hoff = row_bytes(s.ht, r0);
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
    uint8_t* dst = s.hq + static_cast<size_t>(s.slots[o + i]) * s.hrow + hoff;
    if (s.ht == GgmlType::f32) {
      std::memcpy(dst, gi, sizeof(float) * static_cast<size_t>(nr));
    } else {
      hk.from_float(gi, dst, nr);
    }
  }
}

void phase_down(const ExpertStep& s, int e, int64_t r0, int64_t r1, int ti) {
  const int64_t o = s.off[e], m = s.off[e + 1] - o, nr = r1 - r0;
  float* y = s.tbuf + ti * s.tstride;
  rows_product(s.down[e], r0, r1, s.hp + o, m, y, kDownRows);
  const float* b = s.down_b ? s.down_b + e * s.d + r0 : nullptr;
  for (int64_t i = 0; i < m; ++i) {
    const int32_t slot = s.slots[o + i];
    float* yi = y + i * kDownRows;
    if (b)
      for (int64_t j = 0; j < nr; ++j) yi[j] += b[j];
    float* dst = s.ybuf + int64_t{slot} * s.d + r0;
    if (s.wts) {
      const float wt = s.wts[slot];
      for (int64_t j = 0; j < nr; ++j) dst[j] = yi[j] * wt;
    } else {
      std::memcpy(dst, yi, sizeof(float) * static_cast<size_t>(nr));
    }
  }
}

// Experts [0..n) of one step (their Mats filled in).
struct ExpertJob {
  const ExpertStep* s = nullptr;
  const int32_t* experts = nullptr;
  int n = 0;
};

// Both phases of every job's experts (routed and shared) in one pool region: all phase-1 items
// first, then the down items, each waiting until its expert's phase-1 items are done. Items are
// claimed in order, so a thread only ever waits for items another thread is already running (no
// deadlock, and the caller still runs the shares of workers that never started); a thread that
// runs out of phase-1 items goes on to the first expert's down rows instead of idling at a
// region end.
void run_experts(const ExpertJob* jobs, int n_jobs, ThreadPool& pool) {
  constexpr int kMaxJobs = 2;
  STRATA_ASSERT(n_jobs >= 1 && n_jobs <= kMaxJobs);
  int64_t work = 0, nb1[kMaxJobs], nb2[kMaxJobs], first1[kMaxJobs + 1], first2[kMaxJobs + 1];
  first1[0] = 0;
  for (int j = 0; j < n_jobs; ++j) {
    const ExpertStep& s = *jobs[j].s;
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
      const ExpertStep& s = *jobs[j].s;
      const int64_t i = (item - first1[j]) / nb1[j], r0 = (item - first1[j]) % nb1[j] * s.rb1;
      phase_gate_up(s, jobs[j].experts[i], r0, std::min(s.F, r0 + s.rb1), ti);
      count_done(s.done1[i]);
      return;
    }
    while (item >= first2[j + 1]) ++j;
    const ExpertStep& s = *jobs[j].s;
    const int64_t i = std::min<int64_t>((item - first2[j]) / nb2[j], jobs[j].n - 1), rows = down_rows(j, i);
    const int64_t r0 = (item - first2[j] - i * nb2[j]) * rows;
    wait_count(s.done1[i], static_cast<int32_t>(nb1[j]));
    phase_down(s, jobs[j].experts[i], r0, std::min(s.d, r0 + rows), ti);
  });
}

void run_experts(const ExpertStep& s, const int32_t* experts, int n_exp, ThreadPool& pool) {
  const ExpertJob job{&s, experts, n_exp};
  run_experts(&job, 1, pool);
}

// Fills the activation tables of s for x [n][d] and n_slots = n·K slots grouped by off/slots,
// and the scratch, all from the arena. gate/up/down: any expert's matrices (types and shapes).
void prepare_step(ExpertStep& s, const Mat& gate, const Mat& up, const Mat& down, const float* x, int64_t n,
                  int K, int n_groups, ThreadPool& pool, Arena& arena) {
  const int64_t n_slots = n * K, d = s.d;
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
  s.tbuf = arena.alloc<float>(static_cast<size_t>(pool.size() * s.tstride));
  s.done1 = arena.alloc<std::atomic<int32_t>>(static_cast<size_t>(n_groups));
  for (int e = 0; e < n_groups; ++e) new (&s.done1[e]) std::atomic<int32_t>(0);
}

}  // namespace

namespace {

// The dense SwiGLU FFN as a one-expert step (one slot per token, the slot rows are the output
// rows). mats: gate, up, down, kept alive by the caller while the step runs.
void prepare_dense_step(ExpertStep& s, const Mat* mats, const float* x, int64_t n, float* out,
                        ThreadPool& pool, Arena& arena) {
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
  s.ybuf = out;
  prepare_step(s, mats[0], mats[1], mats[2], x, n, 1, 1, pool, arena);
}

constexpr int32_t kOnlyExpert = 0;

}  // namespace

void ffn_swiglu_forward(const TensorView& gate, const TensorView& up, const TensorView& down, const float* x,
                        int64_t n, float* out, ThreadPool& pool, Arena& arena) {
  if (n <= 0) return;
  STRATA_ASSERT(down.ne[1] == gate.ne[0] && up.ne[1] == gate.ne[1] && down.ne[0] == gate.ne[1]);
  const size_t mk = arena.mark();
  ExpertStep s;
  const Mat mats[3] = {mat_of(gate), mat_of(up), mat_of(down)};
  prepare_dense_step(s, mats, x, n, out, pool, arena);
  run_experts(s, &kOnlyExpert, 1, pool);
  arena.rewind(mk);
}

Status moe_forward(const MoeConfig& c, const MoeWeights& w, const float* x, int64_t n, float* out,
                   ThreadPool& pool, Arena& arena, ExpertSource* experts, int layer) {
  const int E = c.n_expert, K = c.n_used;
  STRATA_ASSERT(K >= 1 && K <= E);
  float* logits = arena.alloc<float>(n * E);
  linear(pool, arena, *w.gate_inp, x, n, logits, w.gate_inp_b);
  int32_t* sel = arena.alloc<int32_t>(n * K);
  float* wts = arena.alloc<float>(n * K);
  route(c, logits, n, sel, wts);
  if (experts) experts->on_route(layer, x, n, sel, wts, K);
  return moe_experts_forward(c, w, x, n, sel, wts, out, pool, arena, experts, layer);
}

Status moe_experts_forward(const MoeConfig& c, const MoeWeights& w, const float* x, int64_t n,
                           const int32_t* sel, const float* wts, float* out, ThreadPool& pool, Arena& arena,
                           ExpertSource* experts, int layer) {
  const int E = c.n_expert, K = c.n_used;
  const int64_t d = c.n_embd;
  STRATA_ASSERT(K >= 1 && K <= E);

  // Counting sort of the slots (t·K + k) by expert; within an expert, token order.
  int32_t* off = arena.alloc<int32_t>(E + 1);
  std::fill(off, off + E + 1, 0);
  for (int64_t i = 0; i < n * K; ++i) off[sel[i] + 1]++;
  for (int e = 0; e < E; ++e) off[e + 1] += off[e];
  int32_t* slots = arena.alloc<int32_t>(n * K);
  int32_t* fill = arena.alloc<int32_t>(E);
  std::copy(off, off + E, fill);
  for (int64_t i = 0; i < n * K; ++i) slots[fill[sel[i]]++] = static_cast<int32_t>(i);
  int32_t* active = arena.alloc<int32_t>(E);
  int n_active = 0;
  for (int e = 0; e < E; ++e)
    if (off[e + 1] > off[e]) active[n_active++] = e;

  ExpertStep s;
  s.d = d;
  s.F = c.n_ff;
  s.act = c.act;
  s.alpha = c.oai_alpha;
  s.limit = c.act == ExpertAct::expert_act_swiglu_clamped ? c.clamp : c.oai_limit;
  s.off = off;
  s.slots = slots;
  s.wts = wts;
  s.gate_b = w.gate_exps_b;
  s.up_b = w.up_exps_b;
  s.down_b = w.down_exps_b;
  Mat* gate = arena.alloc<Mat>(E);
  Mat* up = arena.alloc<Mat>(E);
  Mat* down = arena.alloc<Mat>(E);
  s.gate = gate;
  s.up = up;
  s.down = down;
  float* ybuf = arena.alloc<float>(n * K * d);  // [n][K][d] weighted expert outputs
  s.ybuf = ybuf;
  prepare_step(s, mat_of(*w.gate_exps), mat_of(*w.up_exps), mat_of(*w.down_exps), x, n, K, E, pool, arena);

  // The shared expert (always on): its own step, in the routed experts' region when they come
  // from memory.
  float* sh = nullptr;
  ExpertStep shs;
  Mat shm[3];
  if (w.gate_shexp) {
    sh = arena.alloc<float>(n * d);
    shm[0] = mat_of(*w.gate_shexp);
    shm[1] = mat_of(*w.up_shexp);
    shm[2] = mat_of(*w.down_shexp);
    STRATA_ASSERT(shm[0].in == d && shm[2].in == w.gate_shexp->ne[1] && w.down_shexp->ne[1] == d);
    shs.act = c.shexp_act;
    shs.limit = c.shexp_clamp;
    prepare_dense_step(shs, shm, x, n, sh, pool, arena);
  }

  if (!experts) {
    for (int i = 0; i < n_active; ++i) {
      const int e = active[i];
      gate[e] = mat_of(*w.gate_exps, e);
      up[e] = mat_of(*w.up_exps, e);
      down[e] = mat_of(*w.down_exps, e);
    }
    const ExpertJob jobs[2] = {{&s, active, n_active}, {&shs, &kOnlyExpert, 1}};
    run_experts(jobs, sh ? 2 : 1, pool);
  } else {
    // Experts already resident go first, in one pool region with the shared expert, while the
    // reads of the others are in flight; then the others, each region taking every expert whose
    // read has completed by then (wait_any). One region per batch rather than per expert (fewer
    // region tails; on the issue-6 model tg went from 66.7 to 69.8 tok/s median over 4
    // interleaved pairs). Outputs land in ybuf per slot and an expert's rows do not depend on the
    // batch, so the order changes no bit.
    int32_t* batch = arena.alloc<int32_t>(E);
    int32_t* pending = arena.alloc<int32_t>(E);
    int n_pending = 0;
    auto compute = [&](int n_batch, bool with_shared) -> Status {
      Status st;
      int n_got = 0;
      for (; n_got < n_batch; ++n_got) {
        const int32_t e = batch[n_got];
        auto got = experts->acquire(layer, e);
        if (!got.ok()) {
          st = got.error();
          break;
        }
        const ExpertViews& v = got.value();
        STRATA_ASSERT(v.gate.type == w.gate_exps->type && v.up.type == w.up_exps->type &&
                      v.down.type == w.down_exps->type);
        gate[e] = mat_of(v.gate);
        up[e] = mat_of(v.up);
        down[e] = mat_of(v.down);
      }
      if (st.ok()) {
        const ExpertJob jobs[2] = {{&s, batch, n_batch}, {&shs, &kOnlyExpert, 1}};
        if (n_batch > 0 || with_shared)
          run_experts(n_batch > 0 ? jobs : jobs + 1, (n_batch > 0 ? 1 : 0) + (with_shared ? 1 : 0), pool);
      }
      for (int i = 0; i < n_got; ++i) experts->release(layer, batch[i]);
      return st;
    };
    int n_batch = 0;
    for (int i = 0; i < n_active; ++i) {
      if (experts->ready(layer, active[i]))
        batch[n_batch++] = active[i];
      else
        pending[n_pending++] = active[i];
    }
    STRATA_TRY(compute(n_batch, sh != nullptr));
    while (n_pending > 0) {
      const int k = experts->wait_any(layer, pending, n_pending);
      STRATA_ASSERT(k >= 0 && k < n_pending);
      n_batch = 0;
      batch[n_batch++] = pending[k];
      pending[k] = pending[--n_pending];
      // Whatever else has landed meanwhile, unless the first has no read under way yet (its
      // acquire() may then evict, so it goes alone, as at the minimum budget).
      const bool landed = experts->ready(layer, batch[0]);
      for (int i = 0; landed && i < n_pending;) {
        if (experts->ready(layer, pending[i])) {
          batch[n_batch++] = pending[i];
          pending[i] = pending[--n_pending];
        } else {
          ++i;
        }
      }
      STRATA_TRY(compute(n_batch, false));
    }
  }
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * d;
    std::memcpy(o, ybuf + t * K * d, sizeof(float) * d);
    for (int k = 1; k < K; ++k) vec_add(o, ybuf + (t * K + k) * d, d);
  }

  if (sh) {
    for (int64_t t = 0; t < n; ++t) {
      float g = 1.0f;
      if (w.gate_inp_shexp) {
        // llama.cpp evaluates this sigmoid as silu(z)/z.
        const float z = dot_f32(w.gate_inp_shexp, x + t * d, d);
        g = z != 0.0f ? silu(z) / z : 0.5f;
      }
      for (int64_t j = 0; j < d; ++j) out[t * d + j] += sh[t * d + j] * g;
    }
  }
  return {};
}

}  // namespace strata
