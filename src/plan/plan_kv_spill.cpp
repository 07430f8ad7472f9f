// serve's paged KV pool and its prefix-cache spill tiers in the memory bill (planner.h, kv_cache
// and kv_spill): kv/KvPool::bill sizes them, for the pool the engine makes (--kv-budget, else -c x
// --batch sequences in whole blocks), at the plan's KV types.
#include <algorithm>

#include "kv/kv_pool.h"
#include "plan/planner.h"

namespace strata {

namespace {

// The pool serve makes for these options (KvPool's inputs as the engine sets them).
KvPoolOptions serve_pool(const KvSpec& spec, const PlanOptions& p) {
  KvPoolOptions po;
  po.block_size = p.block_size;
  po.budget_bytes =
      p.kv_budget > 0 ? p.kv_budget : KvPool::default_budget(spec, p.n_ctx, p.n_seq, p.block_size);
  po.checkpoints = int64_t{p.ctx_checkpoints} * p.n_seq;
  po.ram_bytes = p.cache_ram < 0 ? po.budget_bytes : static_cast<uint64_t>(p.cache_ram);
  if (p.prefix_cache_dir) po.disk_dir = "(planned)";
  po.disk_bytes = p.prefix_cache_dir_size;
  return po;
}

}  // namespace

void plan_kv_spill(const PlanModel& m, const PlanOptions& p, PlanBill* b) {
  const bool asked = p.cache_ram != 0 || p.prefix_cache_dir;  // the spill tiers are priced when asked
  if (m.kv.family == KvFamily::mla) {
    if (asked) b->kv_spill_note = "strata does not run this architecture (no KV pool)";
    return;
  }
  const KvSpec spec = plan_kv_spec(m, p);  // at the plan's types, as the bill's lines
  auto kb = KvPool::bill(spec, serve_pool(spec, p));
  if (!kb.ok()) {
    if (asked) b->kv_spill_note = kb.message();
    return;
  }
  b->kv_checkpoints = kb->checkpoints;  // window-ring checkpoints: serve's default
  if (!asked) return;
  if (!kb->spill) {
    b->kv_spill_note = "not every KV part is paged (windows, compressed rows): no prefix blocks to spill";
    return;
  }
  b->kv_ram_tier = kb->ram_tier;
  b->kv_spill_queue = kb->spill_queue;
  b->kv_ssd = kb->ssd;
  b->kv_ssd_file = kb->ssd_file;
  b->kv_ssd_budget = kb->ssd_budget;
}

Status plan_kv_budget(const PlanModel& m, const PlanOptions& p, PlanBill* b) {
  if (p.kv_budget == 0) return {};
  if (m.kv.family == KvFamily::mla) return err("plan: --kv-budget: strata does not run this architecture");
  const KvSpec spec = plan_kv_spec(m, p);
  KvPoolOptions po;
  po.block_size = p.block_size;
  po.budget_bytes = KvPool::default_budget(spec, p.n_ctx, p.n_seq, p.block_size);
  STRATA_ASSIGN(const KvPoolBill def, KvPool::bill(spec, po));
  auto gb = KvPool::bill(spec, serve_pool(spec, p));
  if (!gb.ok()) return err_context("plan", gb.error());
  const KvPoolBill& got = *gb;
  b->kv_pool_default = def.pool_bytes;
  b->kv_pool_budget = got.pool_bytes;
  // The paged lines share the pool as they share a position's bytes; the last takes the rounding.
  uint64_t paged = 0, left = got.pool_bytes;
  for (const PlanKvLine& l : b->kv_lines)
    if (l.paged) paged += l.bytes;
  PlanKvLine* last = nullptr;
  b->kv_cache = 0;
  for (PlanKvLine& l : b->kv_lines) {
    if (l.paged && paged > 0) {
      l.bytes = static_cast<uint64_t>(static_cast<long double>(got.pool_bytes) * l.bytes / paged);
      left -= std::min(left, l.bytes);
      last = &l;
    }
    b->kv_cache += l.bytes;
  }
  if (last) {
    last->bytes += left;
    b->kv_cache += left;
  }
  return {};
}

}  // namespace strata
