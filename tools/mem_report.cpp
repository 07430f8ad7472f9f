#include "mem_report.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "base/units.h"
#include "format/tensor_names.h"
#include "memory/experts/expert_store.h"
#include "memory/tier/mem_resident.h"
#include "format/safetensors_dir.h"
#include "plan/planner.h"
#include "obs/proc_mem.h"

namespace strata::cli {

const char* const MemReport::kNames[MemReport::kKeys] = {
    "dense_weights", "expert_weights_resident", "kv_cache", "scratch", "io_buffers", "total"};

MemReport mem_report(const Model& m, const Session& s, int n_batch, uint64_t pool_kv) {
  MemReport r;
  const ExpertStore* st = m.expert_store();
  const bool streamed = st && !st->info().resident;
  // Page ranges of each class, merged so that a page shared by small tensors counts once.
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges[2];  // 0 dense, 1 experts
  // A checkpoint directory has no GGUF mapping: its weights are measured in the total only.
  static const std::vector<TensorView> kNone;
  for (const TensorView& t : m.has_gguf() ? m.file().tensors() : kNone) {
    if (t.nbytes == 0) continue;
    const uintptr_t p = reinterpret_cast<uintptr_t>(t.data);
    ranges[is_routed_expert(t.name) ? 1 : 0].push_back(
        {p & ~uintptr_t{4095}, (p + t.nbytes + 4095) & ~uintptr_t{4095}});
  }
  uint64_t bytes[2] = {0, 0};
  for (int c = 0; c < 2; ++c) {
    std::sort(ranges[c].begin(), ranges[c].end());
    for (size_t i = 0; i < ranges[c].size();) {
      uintptr_t a = ranges[c][i].first, b = ranges[c][i].second;
      for (++i; i < ranges[c].size() && ranges[c][i].first <= b; ++i) b = std::max(b, ranges[c][i].second);
      bytes[c] += mem_resident_bytes(reinterpret_cast<const void*>(a), b - a);
    }
  }
  const uint64_t dense = bytes[0], experts = bytes[1];
  const Session::Memory sm = s.memory();
  r.measured[0] = dense;
  r.measured[1] = st ? st->expert_resident_bytes() : experts;
  r.measured[2] = sm.kv_cache + pool_kv;
  // The caller's logits row (run and bench hold one of n_vocab floats), which the plan counts in scratch.
  r.measured[3] = sm.scratch + sizeof(float) * static_cast<uint64_t>(std::max(m.n_vocab(), 0));
  r.measured[4] = streamed ? st->io_overhead_bytes() : 0;
  r.measured[5] = peak_rss_bytes();

  // A checkpoint directory: the plan of `strata plan -m DIR` (dense weights estimated, not measured
  // here; the experts and their slots exact).
  auto pm = m.has_gguf()         ? plan_model_from_gguf(m.file())
            : m.checkpoint_dir() ? plan_model_from_checkpoint_dir(m.checkpoint_dir()->dir())
                                 : Result<PlanModel>(err("no model file"));
  if (!pm.ok()) {
    r.plan_error = pm.message();
    return r;
  }
  PlanOptions o;
  o.n_ctx = s.n_ctx();
  o.kv_type = sm.kv.k;
  o.kv_type_v = sm.kv.v;
  o.n_ubatch = n_batch;
  o.n_threads = m.pool().size();
  if (streamed) {
    o.expert_budget = st->info().budget_bytes;
    o.io_threads = st->info().io_threads;
    if (!io_backend_from_name(st->info().io_backend, &o.io_backend))
      o.io_backend = IoBackend::io_backend_threads;
    o.io_depth = st->info().io_depth;
  }
  auto bill = plan_make(*pm, o);
  if (!bill.ok()) {
    r.plan_error = bill.message();
    return r;
  }
  r.planned[0] = bill->dense_weights;
  r.planned[1] = bill->expert_weights_resident;
  r.planned[2] = bill->kv_cache;
  r.planned[3] = bill->scratch;
  r.planned[4] = bill->io_buffers;
  r.planned[5] = bill->total;
  return r;
}

std::string mem_report_text(const MemReport& r) {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line, "strata: memory    %-24s %12s %12s %8s\n", "(bytes as strata plan)",
                "planned", "measured", "diff");
  s += line;
  for (int k = 0; k < MemReport::kKeys; ++k) {
    const double diff =
        r.planned[k] ? 100.0 * (static_cast<double>(r.measured[k]) - r.planned[k]) / r.planned[k] : 0.0;
    std::snprintf(line, sizeof line, "strata: memory    %-24s %12s %12s %+7.1f%%\n", MemReport::kNames[k],
                  r.plan_error.empty() ? format_bytes(r.planned[k]).c_str() : "-",
                  format_bytes(r.measured[k]).c_str(), diff);
    s += line;
  }
  if (!r.plan_error.empty()) s += "strata: memory    no plan: " + r.plan_error + "\n";
  return s;
}

nlohmann::json mem_report_json(const MemReport& r) {
  nlohmann::json j;
  for (int k = 0; k < MemReport::kKeys; ++k) {
    j["measured"][MemReport::kNames[k]] = r.measured[k];
    if (r.plan_error.empty()) j["planned"][MemReport::kNames[k]] = r.planned[k];
  }
  if (!r.plan_error.empty()) j["plan_error"] = r.plan_error;
  return j;
}

}  // namespace strata::cli
