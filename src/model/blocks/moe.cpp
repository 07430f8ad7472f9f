#include "model/blocks/moe.h"

#include <algorithm>
#include <cstring>

#include "base/assert.h"
#include "base/clock.h"
#include "kernels/device.h"
#include "kernels/expert_ffn.h"
#include "kernels/ops.h"
#include "kernels/traits.h"
#include "kernels/linear.h"

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

constexpr int32_t kOnlyExpert = 0;

// The experts of one step that devices hold (ExpertViews::device): one DeviceExpertWork per
// device, submitted before the host computes its own and waited for before the sums.
struct DeviceSubmits {
  static constexpr int kMaxDevices = 4;
  Device* dev[kMaxDevices] = {};
  int32_t* ids[kMaxDevices] = {};
  DeviceExpert* mats[kMaxDevices] = {};
  int n[kMaxDevices] = {};
  int n_dev = 0;

  // Adds expert e held by `d`; arrays for E experts per device come from the arena.
  Status add(Device* d, int e, const DeviceExpert& m, int E, Arena& arena) {
    int i = 0;
    while (i < n_dev && dev[i] != d) ++i;
    if (i == n_dev) {
      if (n_dev == kMaxDevices) return err("moe: experts of more than %d devices in one layer", kMaxDevices);
      dev[i] = d;
      ids[i] = arena.alloc<int32_t>(static_cast<size_t>(E));
      mats[i] = arena.alloc<DeviceExpert>(static_cast<size_t>(E));
      n[i] = 0;
      ++n_dev;
    }
    ids[i][n[i]] = e;
    mats[i][n[i]++] = m;
    return {};
  }
  // Submits every device's experts (work: the step's fields; its experts / mats / n_run are set
  // here) and returns each device's ticket in tickets[].
  // On an error, what was submitted is waited for (its buffers stay pinned until then).
  Status submit(DeviceExpertWork work, DeviceTicket* tickets) {
    for (int i = 0; i < n_dev; ++i) {
      work.experts = ids[i];
      work.mats = mats[i];
      work.n_run = n[i];
      auto t = dev[i]->run_experts(work);
      if (!t.ok()) {
        for (int j = 0; j < i; ++j) (void)dev[j]->wait(tickets[j]);
        return t.error();
      }
      tickets[i] = t.value();
    }
    return {};
  }
  Status wait(const DeviceTicket* tickets) {
    for (int i = 0; i < n_dev; ++i) STRATA_TRY(dev[i]->wait(tickets[i]));
    return {};
  }
};

}  // namespace

void moe_drop_light_choices(const float* min_share, int64_t n, int K, int32_t* sel, float* wts) {
  for (int64_t t = 0; t < n; ++t) {
    const float share = min_share[t];
    if (!(share > 0.0f)) continue;
    int32_t* s = sel + t * K;
    float* w = wts + t * K;
    int top = 0;
    float all = 0.0f;
    for (int j = 0; j < K; ++j) {
      all += w[j];
      if (w[j] > w[top]) top = j;
    }
    const float tau = share * all / static_cast<float>(K);
    float kept = 0.0f;
    for (int j = 0; j < K; ++j) {
      if (j != top && w[j] < tau) {
        s[j] = -1;
        w[j] = 0.0f;
      }
      kept += w[j];
    }
    if (kept > 0.0f && kept != all) {
      const float scale = all / kept;
      for (int j = 0; j < K; ++j) w[j] *= scale;
    }
  }
}

Status moe_forward(const MoeConfig& c, const MoeWeights& w, const float* x, int64_t n, float* out,
                   ThreadPool& pool, Arena& arena, ExpertSource* experts, int layer, const float* min_share) {
  const int E = c.n_expert, K = c.n_used;
  STRATA_ASSERT(K >= 1 && K <= E);
  float* logits = arena.alloc<float>(n * E);
  linear(pool, arena, *w.gate_inp, x, n, logits, w.gate_inp_b);
  int32_t* sel = arena.alloc<int32_t>(n * K);
  float* wts = arena.alloc<float>(n * K);
  route(c, logits, n, sel, wts);
  if (min_share) moe_drop_light_choices(min_share, n, K, sel, wts);
  if (experts) experts->on_route(layer, x, n, sel, wts, K);
  return moe_experts_forward(c, w, x, n, sel, wts, out, pool, arena, experts, layer);
}

Status moe_experts_forward(const MoeConfig& c, const MoeWeights& w, const float* x, int64_t n,
                           const int32_t* sel, const float* wts, float* out, ThreadPool& pool, Arena& arena,
                           ExpertSource* experts, int layer) {
  const int E = c.n_expert, K = c.n_used;
  const int64_t d = c.n_embd;
  STRATA_ASSERT(K >= 1 && K <= E);

  // Counting sort of the slots (t·K + k) by expert; within an expert, token order. Dropped slots
  // (sel -1) run nowhere.
  int32_t* off = arena.alloc<int32_t>(E + 1);
  std::fill(off, off + E + 1, 0);
  for (int64_t i = 0; i < n * K; ++i)
    if (sel[i] >= 0) off[sel[i] + 1]++;
  for (int e = 0; e < E; ++e) off[e + 1] += off[e];
  int32_t* slots = arena.alloc<int32_t>(n * K);
  int32_t* fill = arena.alloc<int32_t>(E);
  std::copy(off, off + E, fill);
  for (int64_t i = 0; i < n * K; ++i)
    if (sel[i] >= 0) slots[fill[sel[i]]++] = static_cast<int32_t>(i);
  int32_t* active = arena.alloc<int32_t>(E);
  int n_active = 0;
  for (int e = 0; e < E; ++e)
    if (off[e + 1] > off[e]) active[n_active++] = e;

  ExpertFfn s;
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
  ExpertMat* gate = arena.alloc<ExpertMat>(E);
  ExpertMat* up = arena.alloc<ExpertMat>(E);
  ExpertMat* down = arena.alloc<ExpertMat>(E);
  s.gate = gate;
  s.up = up;
  s.down = down;
  float* ybuf = arena.alloc<float>(n * K * d);  // [n][K][d] weighted expert outputs
  s.y = ybuf;
  expert_ffn_prepare(s, expert_mat(*w.gate_exps), expert_mat(*w.up_exps), expert_mat(*w.down_exps), x, n, K,
                     E, pool.size(), arena);

  // The shared expert (always on): its own step, in the routed experts' region when they come
  // from memory.
  float* sh = nullptr;
  ExpertFfn shs;
  ExpertMat shm[3];
  if (w.gate_shexp) {
    sh = arena.alloc<float>(n * d);
    shm[0] = expert_mat(*w.gate_shexp);
    shm[1] = expert_mat(*w.up_shexp);
    shm[2] = expert_mat(*w.down_shexp);
    STRATA_ASSERT(shm[0].in == d && shm[2].in == w.gate_shexp->ne[1] && w.down_shexp->ne[1] == d);
    shs.act = c.shexp_act;
    shs.limit = c.shexp_clamp;
    expert_ffn_prepare_dense(shs, shm, x, n, sh, pool.size(), arena);
  }

  if (!experts) {
    for (int i = 0; i < n_active; ++i) {
      const int e = active[i];
      gate[e] = expert_mat(*w.gate_exps, e);
      up[e] = expert_mat(*w.up_exps, e);
      down[e] = expert_mat(*w.down_exps, e);
    }
    const ExpertFfnJob jobs[2] = {{&s, active, n_active}, {&shs, &kOnlyExpert, 1}};
    expert_ffn_run(jobs, sh ? 2 : 1, pool);
  } else {
    // The step's fields of the work handed to devices that hold experts (kernels/device.h).
    DeviceExpertWork dw;
    dw.layer = layer;
    dw.step = s;
    dw.n_expert = E;
    dw.K = K;
    dw.x = x;
    dw.n = n;
    // Experts already resident go first, in one pool region with the shared expert, while the
    // reads of the others are in flight; then the others, each region taking every expert whose
    // read has completed by then (wait_any). One region per batch rather than per expert (fewer
    // region tails; on the issue-6 model tg went from 66.7 to 69.8 tok/s median over 4
    // interleaved pairs). Experts a device holds are submitted to it before the host computes its
    // own and waited for after. Outputs land in ybuf per slot and an expert's rows do not depend on
    // the batch or the device, so the order changes no bit.
    int32_t* batch = arena.alloc<int32_t>(E);
    int32_t* host = arena.alloc<int32_t>(E);
    int32_t* pending = arena.alloc<int32_t>(E);
    int n_pending = 0;
    // Weight bytes of one routed expert and of the shared expert, for the measured rates
    // (ExpertSource::on_computed).
    const double expert_bytes =
        static_cast<double>(w.gate_exps->nb[2] + w.up_exps->nb[2] + w.down_exps->nb[2]);
    double shared_bytes = 0.0;
    if (sh)
      for (const TensorView* t : {w.gate_shexp, w.up_shexp, w.down_shexp})
        shared_bytes += static_cast<double>(t->nb[1]) * static_cast<double>(t->ne[1]);
    auto compute = [&](int n_batch, bool with_shared) -> Status {
      Status st;
      int n_got = 0, n_host = 0;
      DeviceSubmits on_dev;
      ExpertRunTimes times;
      times.host_bytes = with_shared ? shared_bytes : 0.0;
      times.host_slot_bytes = with_shared ? shared_bytes * static_cast<double>(n) : 0.0;
      for (; n_got < n_batch; ++n_got) {
        const int32_t e = batch[n_got];
        auto got = experts->acquire(layer, e);
        if (!got.ok()) {
          st = got.error();
          break;
        }
        const ExpertViews& v = got.value();
        const double slot_bytes = expert_bytes * static_cast<double>(off[e + 1] - off[e]);
        if (v.device != nullptr) {
          times.device_bytes += expert_bytes;
          times.device_slot_bytes += slot_bytes;
          st = on_dev.add(v.device, e, v.on_device, E, arena);
          if (!st.ok()) {
            ++n_got;
            break;
          }
          continue;
        }
        STRATA_ASSERT(v.gate.type == w.gate_exps->type && v.up.type == w.up_exps->type &&
                      v.down.type == w.down_exps->type);
        gate[e] = expert_mat(v.gate);
        up[e] = expert_mat(v.up);
        down[e] = expert_mat(v.down);
        host[n_host++] = e;
        times.host_bytes += expert_bytes;
        times.host_slot_bytes += slot_bytes;
      }
      DeviceTicket tickets[DeviceSubmits::kMaxDevices] = {};
      const double t0 = now_seconds();
      if (st.ok()) st = on_dev.submit(dw, tickets);
      if (st.ok()) {
        const double t1 = now_seconds();
        const ExpertFfnJob jobs[2] = {{&s, host, n_host}, {&shs, &kOnlyExpert, 1}};
        if (n_host > 0 || with_shared)
          expert_ffn_run(n_host > 0 ? jobs : jobs + 1, (n_host > 0 ? 1 : 0) + (with_shared ? 1 : 0), pool);
        const double t2 = now_seconds();
        for (int i = 0; i < on_dev.n_dev; ++i) times.device_bound |= !on_dev.dev[i]->reached(tickets[i]);
        st = on_dev.wait(tickets);
        times.host_s = n_host > 0 || with_shared ? t2 - t1 : 0.0;
        times.device_s = on_dev.n_dev > 0 ? now_seconds() - t0 : 0.0;
      }
      for (int i = 0; i < n_got; ++i) experts->release(layer, batch[i]);
      if (st.ok()) experts->on_computed(layer, times);
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
    int k0 = 0;  // the first kept choice (0 unless a profile dropped it)
    while (k0 + 1 < K && sel[t * K + k0] < 0) ++k0;
    std::memcpy(o, ybuf + (t * K + k0) * d, sizeof(float) * d);
    for (int k = k0 + 1; k < K; ++k)
      if (sel[t * K + k] >= 0) vec_add(o, ybuf + (t * K + k) * d, d);
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
