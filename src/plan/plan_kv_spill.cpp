// serve's prefix-cache spill tiers in the memory bill (planner.h, kv_spill): kv/KvPool::bill sizes
// them, for the pool the engine makes by default (-c x --batch sequences, whole blocks), at the
// plan's KV types.
#include "kv/kv_pool.h"
#include "plan/planner.h"

namespace strata {

void plan_kv_spill(const PlanModel& m, const PlanOptions& p, PlanBill* b) {
  if (p.cache_ram == 0 && !p.prefix_cache_dir) return;
  if (m.kv.family == KvFamily::mla) {
    b->kv_spill_note = "strata does not run this architecture (no KV pool)";
    return;
  }
  const KvSpec spec = plan_kv_spec(m, p);  // at the plan's types, as the bill's lines
  KvPoolOptions po;
  po.block_size = p.block_size;
  po.budget_bytes = KvPool::default_budget(spec, p.n_ctx, p.n_seq, p.block_size);
  po.ram_bytes = p.cache_ram < 0 ? po.budget_bytes : static_cast<uint64_t>(p.cache_ram);
  if (p.prefix_cache_dir) po.disk_dir = "(planned)";
  po.disk_bytes = p.prefix_cache_dir_size;
  auto kb = KvPool::bill(spec, po);
  if (!kb.ok()) {
    b->kv_spill_note = kb.message();
    return;
  }
  if (!kb->prefix_cache) {
    b->kv_spill_note = "not every KV part is paged (windows, compressed rows): no prefix cache to spill";
    return;
  }
  b->kv_ram_tier = kb->ram_tier;
  b->kv_spill_queue = kb->spill_queue;
  b->kv_ssd = kb->ssd;
  b->kv_ssd_file = kb->ssd_file;
  b->kv_ssd_budget = kb->ssd_budget;
}

}  // namespace strata
