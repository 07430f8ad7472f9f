#include "memory/experts/device_experts.h"

#include <algorithm>
#include <numeric>
#include <regex>

#include "base/clock.h"
#include "base/units.h"
#include "format/tensor_names.h"
#include "memory/experts/expert_policy.h"

namespace strata {

namespace {

constexpr size_t kPartAlign = 256;

size_t align_up(size_t x) {
  return (x + kPartAlign - 1) / kPartAlign * kPartAlign;
}

// The layer's three expert tensors, or false when it has none.
bool expert_parts(const GgufFile& f, int layer, const TensorView* p[kRoutedExpertParts]) {
  for (int i = 0; i < kRoutedExpertParts; ++i) {
    p[i] = f.find_tensor(blk_name(layer, kRoutedExpertPartNames[i]));
    if (p[i] == nullptr || p[i]->n_dims != 3) return false;
  }
  return true;
}

}  // namespace

uint64_t device_expert_bytes(const GgufFile& f, int layer) {
  const TensorView* p[kRoutedExpertParts];
  if (!expert_parts(f, layer, p)) return 0;
  uint64_t bytes = 0;
  for (const TensorView* t : p) bytes += align_up(t->nb[2]);
  return bytes;
}

std::string DeviceExpertPlan::summary(const std::string& device) const {
  std::string s = std::to_string(n_placed) + " of " + std::to_string(n_total) + " experts (" +
                  format_bytes(bytes) + ") on " + device;
  // Layers with experts none of which is placed, as ranges.
  std::string host;
  for (int l = 0; l < n_layer;) {
    auto none = [&](int i) {
      if (expert_bytes[static_cast<size_t>(i)] == 0) return false;
      for (int e = 0; e < n_expert; ++e)
        if (on_device(i, e)) return false;
      return true;
    };
    if (!none(l)) {
      ++l;
      continue;
    }
    int end = l;
    while (end + 1 < n_layer && none(end + 1)) ++end;
    host += (host.empty() ? "" : ",") + std::to_string(l) + (end > l ? "-" + std::to_string(end) : "");
    l = end + 1;
  }
  if (!host.empty()) s += "; layers with every expert on the host: " + host;
  if (miss_slots > 0)
    s += "; " + std::to_string(miss_slots) + " miss slots (" + format_bytes(slots_bytes()) +
         ", --miss-policy " + miss_policy_name(miss) + ")";
  return s;
}

int default_miss_slots(MissPolicy p, int n_expert_used) {
  return p == MissPolicy::miss_cpu ? 0 : 2 * std::max(n_expert_used, 1);
}

MissStats& MissStats::operator+=(const MissStats& o) {
  host_experts += o.host_experts;
  host_slots += o.host_slots;
  copy_experts += o.copy_experts;
  copy_slots += o.copy_slots;
  copies += o.copies;
  slot_hits += o.slot_hits;
  copy_bytes += o.copy_bytes;
  prefetches += o.prefetches;
  copy_s += o.copy_s;
  est_host_s += o.est_host_s;
  est_copy_s += o.est_copy_s;
  return *this;
}

MissStats MissStats::operator-(const MissStats& o) const {
  MissStats d = *this;
  d.host_experts -= o.host_experts;
  d.host_slots -= o.host_slots;
  d.copy_experts -= o.copy_experts;
  d.copy_slots -= o.copy_slots;
  d.copies -= o.copies;
  d.slot_hits -= o.slot_hits;
  d.copy_bytes -= o.copy_bytes;
  d.prefetches -= o.prefetches;
  d.copy_s -= o.copy_s;
  d.est_host_s -= o.est_host_s;
  d.est_copy_s -= o.est_copy_s;
  return d;
}

DeviceExpertTotals DeviceExpertTotals::since(const DeviceExpertTotals& b) const {
  return DeviceExpertTotals{tokens - b.tokens, gpu_slots - b.gpu_slots, host_slots - b.host_slots,
                            miss - b.miss};
}

Result<DeviceExpertPlan> choose_device_experts(const GgufFile& f, int n_layer, int n_expert,
                                               const DeviceExpertOptions& o) {
  DeviceExpertPlan plan;
  plan.n_layer = n_layer;
  plan.n_expert = n_expert;
  const size_t n_keys = static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert);
  plan.placed.assign(n_keys, 0);
  plan.expert_bytes.assign(static_cast<size_t>(n_layer), 0);
  if (!o.counts.empty() && o.counts.size() != n_keys)
    return err("expert placement: %zu activation counts for %d layers of %d experts", o.counts.size(),
               n_layer, n_expert);
  std::vector<std::regex> rx;
  for (const DeviceExpertRule& r : o.rules) {
    try {
      rx.emplace_back(r.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return err("--override-tensor: '%s' is not a regular expression (%s)", r.pattern.c_str(), e.what());
    }
  }
  std::vector<ExpertKey> eligible;
  for (int l = 0; l < n_layer; ++l) {
    plan.expert_bytes[static_cast<size_t>(l)] = device_expert_bytes(f, l);
    if (plan.expert_bytes[static_cast<size_t>(l)] == 0) continue;
    plan.n_total += n_expert;
    bool host = false;
    for (int i = 0; i < kRoutedExpertParts && !host; ++i) {
      const std::string name = blk_name(l, kRoutedExpertPartNames[i]);
      bool matched = false;
      for (size_t r = 0; r < rx.size() && !matched; ++r)
        if (std::regex_search(name, rx[r])) {
          matched = true;
          host = o.rules[r].on_host;
        }
      if (!matched && l < o.n_cpu_moe) host = true;
    }
    if (host) continue;
    for (int e = 0; e < n_expert; ++e) eligible.push_back(ExpertKey{l, e});
  }
  auto count = [&](const ExpertKey& k) {
    return o.counts.empty() ? 0 : o.counts[static_cast<size_t>(k.layer) * n_expert + k.expert];
  };
  std::stable_sort(eligible.begin(), eligible.end(), [&](const ExpertKey& a, const ExpertKey& b) {
    const uint64_t ca = count(a), cb = count(b);
    if (ca != cb) return ca > cb;
    if (a.layer != b.layer) return a.layer > b.layer;
    return a.expert < b.expert;
  });
  // Miss slots, when some expert misses (a rule keeps it on the host, or the budget cannot hold
  // every eligible one): reserved before the hot set, as many as the budget holds.
  plan.miss = o.miss;
  uint64_t budget = o.budget_bytes;
  if (o.miss_slots > 0) {
    uint64_t eligible_bytes = 0;
    for (const ExpertKey& k : eligible) eligible_bytes += plan.expert_bytes[static_cast<size_t>(k.layer)];
    const bool misses =
        eligible.size() < static_cast<size_t>(plan.n_total) || (o.budgeted && eligible_bytes > budget);
    for (uint64_t b : plan.expert_bytes) plan.miss_slot_bytes = std::max(plan.miss_slot_bytes, b);
    if (misses && plan.miss_slot_bytes > 0) {
      plan.miss_slots = o.budgeted ? static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(o.miss_slots),
                                                                         budget / plan.miss_slot_bytes))
                                   : o.miss_slots;
      budget -= o.budgeted ? plan.slots_bytes() : 0;
      if (plan.miss_slots == 0 && o.miss == MissPolicy::miss_copy)
        return err(
            "--miss-policy copy: --gpu-budget leaves %s for the routed experts, not one miss slot of %s",
            format_bytes(o.budget_bytes).c_str(), format_bytes(plan.miss_slot_bytes).c_str());
    }
  }
  for (const ExpertKey& k : eligible) {
    const uint64_t b = plan.expert_bytes[static_cast<size_t>(k.layer)];
    if (o.budgeted && plan.bytes + b > budget) continue;
    plan.placed[static_cast<size_t>(k.layer) * n_expert + k.expert] = 1;
    plan.bytes += b;
    ++plan.n_placed;
  }
  return plan;
}

Result<std::unique_ptr<DeviceExperts>> DeviceExperts::open(const GgufFile& f, Device& dev,
                                                           DeviceExpertPlan plan, ExpertSource* host) {
  std::unique_ptr<DeviceExperts> d(new DeviceExperts(f, dev, std::move(plan), host));
  const DeviceExpertPlan& p = d->plan_;
  d->layers_.resize(static_cast<size_t>(p.n_layer));
  d->miss_.resize(static_cast<size_t>(p.n_layer));
  d->want_.assign(static_cast<size_t>(p.n_expert), 0);
  d->slot_of_.assign(static_cast<size_t>(p.n_expert), -1);
  for (int l = 0; l < p.n_layer; ++l) {
    Layer& L = d->layers_[static_cast<size_t>(l)];
    if (!expert_parts(f, l, L.parts)) {
      for (const TensorView*& t : L.parts) t = nullptr;
      continue;
    }
    for (const TensorView* t : L.parts)
      if (t->ne[2] != p.n_expert)
        return err("expert placement: layer %d has %lld experts, the model %d", l,
                   static_cast<long long>(t->ne[2]), p.n_expert);
    d->act_bytes_per_token_ = 2.0 * 4.0 * static_cast<double>(L.parts[routed_expert_gate]->ne[0]);
    int n_here = 0;
    for (int e = 0; e < p.n_expert; ++e) n_here += p.on_device(l, e);
    if (n_here == 0) continue;
    const uint64_t per = p.expert_bytes[static_cast<size_t>(l)];
    STRATA_ASSIGN(L.buf, dev.alloc(static_cast<size_t>(per) * static_cast<size_t>(n_here),
                                   "routed experts of layer " + std::to_string(l)));
    L.mats.resize(static_cast<size_t>(p.n_expert));
    size_t at = 0;
    DeviceTicket last = 0;
    const double t0 = now_seconds();
    for (int e = 0; e < p.n_expert; ++e) {
      if (!p.on_device(l, e)) continue;
      DeviceMat* m[kRoutedExpertParts] = {&L.mats[static_cast<size_t>(e)].gate,
                                          &L.mats[static_cast<size_t>(e)].up,
                                          &L.mats[static_cast<size_t>(e)].down};
      for (int i = 0; i < kRoutedExpertParts; ++i) {
        const TensorView& t = *L.parts[i];
        auto tk = dev.upload(L.buf, at, t.row(0, e), t.nb[2]);
        if (!tk.ok()) {
          (void)dev.wait(last);  // what was queued lands before the buffers go
          return tk.error();
        }
        last = *tk;
        *m[i] = DeviceMat{&L.buf, at, t.nb[1], t.ne[0], t.ne[1], t.type};
        at += align_up(t.nb[2]);
      }
    }
    STRATA_TRY(dev.wait(last));  // bounds the staging memory in flight to one layer's
    if (p.miss == MissPolicy::miss_auto) d->pcie_.add(static_cast<double>(at), now_seconds() - t0);
  }
  if (p.miss_slots > 0) {
    STRATA_ASSIGN(d->slot_buf_, dev.alloc(static_cast<size_t>(p.slots_bytes()), "routed-expert miss slots"));
    d->slots_.resize(static_cast<size_t>(p.miss_slots));
    if (p.miss == MissPolicy::miss_auto) d->calibrate();
    if (p.miss == MissPolicy::miss_copy) {  // routers that cannot be read: no look-ahead
      auto la = RouterLookahead::build(f, p.n_layer, p.n_expert, std::max(1, p.miss_slots / 2));
      if (la.ok()) d->lookahead_ = std::make_unique<RouterLookahead>(std::move(la).value());
      d->mark_.assign(static_cast<size_t>(p.n_expert), 0);
    }
  }
  return d;
}

DeviceExperts::~DeviceExperts() {
  for (Layer& L : layers_) dev_.free(L.buf);
  dev_.free(slot_buf_);
}

Result<DeviceTicket> DeviceExperts::upload_to(Slot& s, int layer, int expert) {
  const Layer& L = layers_[static_cast<size_t>(layer)];
  const size_t base = static_cast<size_t>(&s - slots_.data()) * static_cast<size_t>(plan_.miss_slot_bytes);
  s.layer = s.expert = -1;  // until its uploads are queued
  DeviceMat* m[kRoutedExpertParts] = {&s.mats.gate, &s.mats.up, &s.mats.down};
  size_t at = base;
  DeviceTicket last = 0;
  for (int i = 0; i < kRoutedExpertParts; ++i) {
    const TensorView& t = *L.parts[i];
    STRATA_ASSIGN(last, dev_.upload(slot_buf_, at, t.row(0, expert), t.nb[2]));
    *m[i] = DeviceMat{&slot_buf_, at, t.nb[1], t.ne[0], t.ne[1], t.type};
    at += align_up(t.nb[2]);
  }
  s.layer = layer;
  s.expert = expert;
  return last;
}

// The upload's rate: one expert into slot 0 (the best of three, waited for each); the device's:
// that expert over one token (the best of three). A device that cannot run it leaves the rate
// unmeasured (auto then keeps misses on the host). Slot 0 keeps the expert.
void DeviceExperts::calibrate() {
  int l = 0;
  while (l < plan_.n_layer && layers_[static_cast<size_t>(l)].parts[0] == nullptr) ++l;
  if (l == plan_.n_layer || slots_.empty()) return;
  const double bytes = static_cast<double>(plan_.expert_bytes[static_cast<size_t>(l)]);
  Slot& s = slots_[0];
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now_seconds();
    auto tk = upload_to(s, l, 0);
    if (!tk.ok() || !dev_.wait(*tk).ok()) {
      s.layer = s.expert = -1;
      return;
    }
    const double dt = now_seconds() - t0;
    best = rep == 0 ? dt : std::min(best, dt);
  }
  pcie_.add(bytes, best);
  // The device's rate at one token and at a batch of 32 (both decode and prompts start measured).
  const TensorView& gate = *layers_[static_cast<size_t>(l)].parts[routed_expert_gate];
  const int E = plan_.n_expert;
  for (int n : {1, 32}) {
    std::vector<int32_t> off(static_cast<size_t>(E) + 1, n), slots(static_cast<size_t>(n));
    off[0] = 0;
    std::iota(slots.begin(), slots.end(), 0);
    const int32_t expert0 = 0;
    std::vector<float> x(static_cast<size_t>(n * gate.ne[0]), 0.01f), y(x.size());
    DeviceExpertWork w;
    w.layer = l;
    w.step.d = gate.ne[0];
    w.step.F = gate.ne[1];
    w.step.off = off.data();
    w.step.slots = slots.data();
    w.step.y = y.data();
    w.n_expert = E;
    w.K = 1;
    w.experts = &expert0;
    w.mats = &s.mats;
    w.n_run = 1;
    w.x = x.data();
    w.n = n;
    for (int rep = 0; rep < 3; ++rep) {
      const double t0 = now_seconds();
      auto t = dev_.run_experts(w);
      if (!t.ok() || !dev_.wait(*t).ok()) return;
      const double dt = now_seconds() - t0;
      best = rep == 0 ? dt : std::min(best, dt);
    }
    gpu_.add(bytes, bytes * n, best);
  }
}

void DeviceExperts::count_upload(int layer, double seconds, bool ahead) {
  ++layer_uploads_;
  std::lock_guard<std::mutex> lk(mu_);
  MissStats& m = miss_[static_cast<size_t>(layer)];
  ++m.copies;
  m.prefetches += ahead;
  m.copy_bytes += plan_.expert_bytes[static_cast<size_t>(layer)];
  m.copy_s += seconds;
}

// Layer + 1's experts as its router ranks them on this layer's input: the missed ones not in a
// slot go into the least recently used slots this layer left unpinned (an upload that fails
// leaves its slot empty; the expert is then copied on demand).
void DeviceExperts::prefetch_next(int layer, const float* x) {
  const int next = layer + 1;
  if (next >= plan_.n_layer || !lookahead_->has(next) ||
      layers_[static_cast<size_t>(next)].parts[0] == nullptr)
    return;
  std::fill(mark_.begin(), mark_.end(), 0);
  lookahead_->predict(next, x, 1, mark_.data());
  for (int e = 0; e < plan_.n_expert; ++e) {
    if (!mark_[static_cast<size_t>(e)] || plan_.on_device(next, e)) continue;
    bool held = false;
    for (const Slot& s : slots_) held |= s.layer == next && s.expert == e;
    if (held) continue;
    int best = -1;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (!slots_[i].pinned && (best < 0 || slots_[i].used < slots_[static_cast<size_t>(best)].used))
        best = static_cast<int>(i);
    if (best < 0) return;
    Slot& s = slots_[static_cast<size_t>(best)];
    const double t0 = now_seconds();
    if (!upload_to(s, next, e).ok()) return;
    s.used = ++clock_;
    count_upload(next, now_seconds() - t0, true);
  }
}

int DeviceExperts::take_slot(int expert) {
  int best = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.pinned) continue;
    if (best < 0 || s.used < slots_[static_cast<size_t>(best)].used) best = static_cast<int>(i);
  }
  if (best >= 0) {
    slots_[static_cast<size_t>(best)].pinned = true;
    slot_of_[static_cast<size_t>(expert)] = best;
    want_[static_cast<size_t>(expert)] = 1;
  }
  return best;
}

void DeviceExperts::begin_step(int64_t n_tokens) {
  tokens_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(n_tokens, 0)), std::memory_order_relaxed);
  if (host_) host_->begin_step(n_tokens);
}

void DeviceExperts::end_step() {
  if (host_) host_->end_step();
}

void DeviceExperts::on_route(int layer, const float* x, int64_t n, const int32_t* sel, const float* wts,
                             int k) {
  uint64_t gpu = 0, run = 0;
  for (int64_t i = 0; i < n * k; ++i) {
    if (sel[i] < 0) continue;  // a choice the sequence's profile dropped: it runs nowhere
    ++run;
    gpu += plan_.on_device(layer, sel[i]);
  }
  if (plan_.n_placed < plan_.n_total && layer >= 0 && layer < plan_.n_layer &&
      layers_[static_cast<size_t>(layer)].parts[0] != nullptr) {
    // The layer's misses: the tokens routed to each, the policy's choice, slots for the copies
    // (the ones whose bytes a slot holds keep it).
    cur_layer_ = layer;
    layer_uploads_ = 0;
    std::fill(want_.begin(), want_.end(), 0);
    std::fill(slot_of_.begin(), slot_of_.end(), -1);
    for (Slot& s : slots_) s.pinned = false;
    std::vector<int64_t> tokens(static_cast<size_t>(plan_.n_expert), 0);
    for (int64_t i = 0; i < n * k; ++i)
      if (sel[i] >= 0 && !plan_.on_device(layer, sel[i])) ++tokens[static_cast<size_t>(sel[i])];
    std::vector<int> ids, in_slot;
    std::vector<MissCandidate> cands;
    const uint64_t bytes = plan_.expert_bytes[static_cast<size_t>(layer)];
    for (int e = 0; e < plan_.n_expert; ++e) {
      if (tokens[static_cast<size_t>(e)] == 0) continue;
      int held = -1;
      for (size_t i = 0; i < slots_.size() && held < 0; ++i)
        if (slots_[i].layer == layer && slots_[i].expert == e) held = static_cast<int>(i);
      ids.push_back(e);
      in_slot.push_back(held);
      cands.push_back(MissCandidate{bytes, tokens[static_cast<size_t>(e)], held >= 0});
    }
    const std::vector<MissDecision> d =
        decide_layer_misses(plan_.miss, miss_costs(), cands, static_cast<int>(slots_.size()));
    MissStats st;
    for (size_t i = 0; i < ids.size(); ++i) {  // copies in a slot already keep it
      const auto t = static_cast<uint64_t>(cands[i].tokens);
      if (d[i].choice == MissChoice::miss_host) {
        ++st.host_experts;
        st.host_slots += t;
        st.est_host_s += d[i].host_s;
        continue;
      }
      ++st.copy_experts;
      st.copy_slots += t;
      st.est_copy_s += d[i].copy_s;
      gpu += t;
      want_[static_cast<size_t>(ids[i])] = 2;
      if (in_slot[i] >= 0) {
        slots_[static_cast<size_t>(in_slot[i])].pinned = true;
        slot_of_[static_cast<size_t>(ids[i])] = in_slot[i];
        want_[static_cast<size_t>(ids[i])] = 1;
      }
    }
    for (size_t i = 0; i < ids.size(); ++i)  // then the others, while slots are free
      if (want_[static_cast<size_t>(ids[i])] == 2 && take_slot(ids[i]) < 0) break;
    {
      std::lock_guard<std::mutex> lk(mu_);
      miss_[static_cast<size_t>(layer)] += st;
    }
    if (lookahead_ && n == 1 && x != nullptr) prefetch_next(layer, x);
  }
  gpu_slots_.fetch_add(gpu, std::memory_order_relaxed);
  host_slots_.fetch_add(run - gpu, std::memory_order_relaxed);
  if (host_) host_->on_route(layer, x, n, sel, wts, k);
}

Result<ExpertViews> DeviceExperts::acquire(int layer, int expert) {
  if (layer < 0 || layer >= plan_.n_layer || expert < 0 || expert >= plan_.n_expert)
    return err("device experts: no expert %d of layer %d", expert, layer);
  if (plan_.on_device(layer, expert)) {
    ExpertViews v;
    v.device = &dev_;
    v.on_device = layers_[static_cast<size_t>(layer)].mats[static_cast<size_t>(expert)];
    return v;
  }
  if (layer == cur_layer_ && slot_of_[static_cast<size_t>(expert)] >= 0) {
    Slot& s = slots_[static_cast<size_t>(slot_of_[static_cast<size_t>(expert)])];
    s.used = ++clock_;
    ExpertViews v;
    v.device = &dev_;
    if (s.layer == layer && s.expert == expert) {
      v.on_device = s.mats;
      std::lock_guard<std::mutex> lk(mu_);
      ++miss_[static_cast<size_t>(layer)].slot_hits;
      return v;
    }
    // The upload is queued on the device's in-order queue ahead of the layer's expert run.
    const double t0 = now_seconds();
    STRATA_TRY(upload_to(s, layer, expert).status());
    count_upload(layer, now_seconds() - t0, false);
    v.on_device = s.mats;
    return v;
  }
  if (host_) return host_->acquire(layer, expert);
  const Layer& L = layers_[static_cast<size_t>(layer)];
  if (L.parts[0] == nullptr) return err("device experts: layer %d has no routed experts", layer);
  ExpertViews v;
  v.gate = L.parts[routed_expert_gate]->slice2d(expert);
  v.up = L.parts[routed_expert_up]->slice2d(expert);
  v.down = L.parts[routed_expert_down]->slice2d(expert);
  return v;
}

bool DeviceExperts::ready(int layer, int expert) const {
  if (plan_.on_device(layer, expert)) return true;
  if (layer == cur_layer_ && want_[static_cast<size_t>(expert)] != 0)
    return want_[static_cast<size_t>(expert)] == 1;  // a copy waits for a slot
  return host_ ? host_->ready(layer, expert) : true;
}

int DeviceExperts::wait_any(int layer, const int32_t* experts, int n) {
  for (int i = 0; i < n; ++i)
    if (plan_.on_device(layer, experts[i])) return i;
  if (layer == cur_layer_) {
    // Copies waiting for a slot: the previous round released its slots, so these take them.
    int first = -1;
    for (int i = 0; i < n; ++i) {
      const auto e = static_cast<size_t>(experts[i]);
      if (want_[e] == 1) return i;
      if (want_[e] == 2 && take_slot(experts[i]) >= 0 && first < 0) first = i;
    }
    if (first >= 0) return first;
  }
  return host_ ? host_->wait_any(layer, experts, n) : 0;
}

void DeviceExperts::release(int layer, int expert) {
  if (plan_.on_device(layer, expert)) return;
  if (layer == cur_layer_ && slot_of_[static_cast<size_t>(expert)] >= 0) {
    slots_[static_cast<size_t>(slot_of_[static_cast<size_t>(expert)])].pinned = false;
    slot_of_[static_cast<size_t>(expert)] = -1;
    want_[static_cast<size_t>(expert)] = 0;
    return;
  }
  if (host_) host_->release(layer, expert);
}

void DeviceExperts::on_computed(int layer, const ExpertRunTimes& t) {
  std::lock_guard<std::mutex> lk(mu_);
  if (t.host_slot_bytes > 0.0) cpu_.add(t.host_bytes, t.host_slot_bytes, t.host_s);
  // The device's own rate: a round it was the slower side of, with no upload queued before it.
  if (t.device_bound && t.device_slot_bytes > 0.0 && layer_uploads_ == 0)
    gpu_.add(t.device_bytes, t.device_slot_bytes, t.device_s);
  if (host_) host_->on_computed(layer, t);
}

MissCosts DeviceExperts::miss_costs() const {
  std::lock_guard<std::mutex> lk(mu_);
  return MissCosts{pcie_.bytes_per_s(), cpu_.table(), gpu_.table(), act_bytes_per_token_};
}

std::string DeviceExperts::miss_summary() const {
  const MissCosts c = miss_costs();
  char b[64];
  auto rate = [&](double r) {
    std::snprintf(b, sizeof b, "%.2f", r / 1e9);
    return std::string(b);
  };
  auto table = [&](const MissRateTable& t) {
    std::string s;
    for (int i = 0; i < kMissBuckets; ++i)
      if (t.bytes_per_s[i] > 0.0)
        s += (s.empty() ? "" : " ") + std::to_string(1 << i) + ":" + rate(t.bytes_per_s[i]);
    return s.empty() ? std::string("-") : s + " GB/s";
  };
  return std::string(miss_policy_name(plan_.miss)) + ": upload " +
         (c.pcie_bytes_per_s > 0.0 ? rate(c.pcie_bytes_per_s) + " GB/s" : std::string("-")) + ", host " +
         table(c.cpu) + ", device " + table(c.gpu) + " (by tokens per expert)";
}

std::vector<MissStats> DeviceExperts::miss_layers() const {
  std::lock_guard<std::mutex> lk(mu_);
  return miss_;
}

DeviceExpertTotals DeviceExperts::totals() const {
  DeviceExpertTotals t{tokens_.load(std::memory_order_relaxed),
                       gpu_slots_.load(std::memory_order_relaxed),
                       host_slots_.load(std::memory_order_relaxed),
                       {}};
  for (const MissStats& m : miss_layers()) t.miss += m;
  return t;
}

}  // namespace strata
