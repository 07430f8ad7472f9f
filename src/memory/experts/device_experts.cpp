#include "memory/experts/device_experts.h"

#include <algorithm>
#include <numeric>
#include <regex>

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
  return s;
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
  for (const ExpertKey& k : eligible) {
    const uint64_t b = plan.expert_bytes[static_cast<size_t>(k.layer)];
    if (o.budgeted && plan.bytes + b > o.budget_bytes) continue;
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
    int n_here = 0;
    for (int e = 0; e < p.n_expert; ++e) n_here += p.on_device(l, e);
    if (n_here == 0) continue;
    const uint64_t per = p.expert_bytes[static_cast<size_t>(l)];
    STRATA_ASSIGN(L.buf, dev.alloc(static_cast<size_t>(per) * static_cast<size_t>(n_here),
                                   "routed experts of layer " + std::to_string(l)));
    L.mats.resize(static_cast<size_t>(p.n_expert));
    size_t at = 0;
    DeviceTicket last = 0;
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
  }
  return d;
}

DeviceExperts::~DeviceExperts() {
  for (Layer& L : layers_) dev_.free(L.buf);
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
  return host_ ? host_->ready(layer, expert) : true;
}

int DeviceExperts::wait_any(int layer, const int32_t* experts, int n) {
  for (int i = 0; i < n; ++i)
    if (plan_.on_device(layer, experts[i])) return i;
  return host_ ? host_->wait_any(layer, experts, n) : 0;
}

void DeviceExperts::release(int layer, int expert) {
  if (!plan_.on_device(layer, expert) && host_) host_->release(layer, expert);
}

DeviceExpertTotals DeviceExperts::totals() const {
  return DeviceExpertTotals{tokens_.load(std::memory_order_relaxed),
                            gpu_slots_.load(std::memory_order_relaxed),
                            host_slots_.load(std::memory_order_relaxed)};
}

}  // namespace strata
