// The engine's paged KV (runtime/engine.h): admission by KV budget, the blocks each turn reserves,
// preemption of the youngest sequence when the pool is short, prefix sharing, and the pool's metrics.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/units.h"
#include "format/gguf.h"
#include "kv/kv_disk_tier.h"
#include "model/arch.h"
#include "obs/latency_histogram.h"
#include "runtime/engine.h"
#include "runtime/engine_slot.h"

namespace strata {

namespace {

// What names a model in the SSD tier's files: its architecture and vocabulary, and for a GGUF its
// size, metadata keys and values, every tensor's name, type and shape, and the first 64 bytes of
// each dense tensor (routed experts' bytes are not touched: they may live on SSD). Two files of
// the same shapes and metadata whose dense weights start alike would collide (docs/design.md).
uint64_t model_fingerprint(const Model& m) {
  std::string s = m.arch_name() + "|" + std::to_string(m.n_vocab()) + "|";
  if (m.has_gguf()) {
    const GgufFile& f = m.file();
    s += std::to_string(f.file_size()) + "|";
    for (const GgufKv& kv : f.metadata()) s += kv.key + "=" + kv.value.to_display(4) + "|";
    for (const TensorView& t : f.tensors()) {
      s += t.name + ":" + std::to_string(static_cast<int>(t.type));
      for (int d = 0; d < t.n_dims; ++d) s += "," + std::to_string(t.ne[d]);
      if (t.name.find("_exps") == std::string::npos && t.data)
        s.append(static_cast<const char*>(t.data), std::min<size_t>(t.nbytes, 64));
      s += "|";
    }
  }
  return kv_checksum(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

}  // namespace

Result<std::unique_ptr<KvPool>> make_kv_pool(const Model& m, int n_ctx, const KvTypes& kv,
                                             const EngineOptions& o) {
  if (!m.arch().paged_kv()) return std::unique_ptr<KvPool>();  // its sessions keep their KV
  STRATA_ASSIGN(const KvSpec spec, m.arch().kv_spec_for(kv));  // the types the sessions will hold
  KvPoolOptions po;
  po.budget_bytes = o.kv_budget;
  po.block_size = o.block_size;
  po.prefix_cache = o.prefix_cache;
  po.rotate = kv.rotate;
  if (po.budget_bytes == 0) po.budget_bytes = KvPool::default_budget(spec, n_ctx, o.n_slots, o.block_size);
  po.ram_bytes = o.cache_ram >= 0 ? static_cast<uint64_t>(o.cache_ram) : po.budget_bytes;
  po.disk_dir = o.prefix_cache_dir;
  po.disk_bytes = o.prefix_cache_dir_size;
  po.verbose = o.kv_verbose;
  po.checkpoints = int64_t{std::max(o.ctx_checkpoints, 0)} * std::max(o.n_slots, 1);
  if (!po.disk_dir.empty()) po.model_fingerprint = model_fingerprint(m);
  return KvPool::create(spec, m.device(), po);
}

Status Engine::make_kv_pool(const Model& m, int n_ctx, const KvTypes& kv) {
  STRATA_ASSIGN(kv_pool_, strata::make_kv_pool(m, n_ctx, kv, opts_));
  if (kv_pool_) kv_bytes_ += kv_pool_->bytes();
  return {};
}

Status Engine::check_fits(const CompletionParams& p) const {
  if (!kv_pool_) return {};
  // The prompt and one generated token at least (a scoring request: the prompt).
  const int64_t pos = static_cast<int64_t>(p.prompt.size()) + (p.n_predict == 0 ? 0 : 1);
  const int32_t need = kv_pool_->blocks_for(pos);
  if (need <= kv_pool_->n_blocks()) return {};
  return err(
      "the request needs %d KV blocks (%lld positions, %s) but the KV budget holds %d blocks (%s); raise "
      "--kv-budget",
      need, static_cast<long long>(pos), format_bytes(kv_pool_->block_bytes() * uint64_t(need)).c_str(),
      kv_pool_->n_blocks(), format_bytes(kv_pool_->bytes()).c_str());
}

// A new or preempted sequence takes the cached blocks of its longest cached prefix and continues
// after them, if the pool can hold its first prefill chunk; else nothing changes.
bool Engine::place(Slot& s, bool resume) {
  BlockTable& t = *s.session->kv_blocks();
  auto fresh = [&] {
    s.session->reset();
    t.set_salt(s.session->knobs().salt());
  };
  fresh();
  const std::span<const int32_t> toks(s.seq.data(), s.target);
  // A request that wants every prompt row's logits evaluates every row.
  int64_t reused = wants_prompt_rows(s.req->p) ? 0 : kv_pool_->adopt_prefix(t, toks);
  if (reused > 0 && !s.session->assume_prefix(static_cast<int>(reused)).ok()) {
    fresh();  // the prefix cannot be taken up (a window checkpoint gone): evaluate it all
    reused = 0;
  }
  const int64_t first = std::min<int64_t>(static_cast<int64_t>(s.target), reused + opts_.n_batch);
  if (kv_pool_->need(t, first) > kv_pool_->available()) {
    s.session->reset();
    return false;
  }
  s.n_eval = static_cast<size_t>(reused);
  s.ready = false;
  const uint64_t evaluated = s.target - static_cast<uint64_t>(reused);
  if (resume) {
    s.parked = false;
    s.n_recomputed += static_cast<int>(evaluated);
    counters_.recomputed_tokens += evaluated;
  } else {
    s.n_cached = static_cast<int>(reused);
    counters_.prompt_tokens_cached += static_cast<uint64_t>(reused);
    counters_.prompt_tokens_prefilled += evaluated;
  }
  return true;
}

Engine::Slot* Engine::victim(const Slot& s) {
  Slot* v = nullptr;
  for (auto& o : slots_) {
    Slot* c = o.get();
    if (c == &s || !c->req || c->parked || c->in_batch || c->age < s.age || wants_prompt_rows(c->req->p) ||
        c->session->kv_blocks()->size() == 0)
      continue;
    if (!v || c->age > v->age) v = c;
  }
  return v;
}

// Drop and recompute later: the full blocks stay cached (a resume may find them), the sampler,
// stop strings and text so far stay with the slot; it evaluates seq again before it goes on.
void Engine::preempt(Slot& s) {
  committed(s);
  checkpoint(s);
  s.session->reset();
  s.target = s.seq.size();
  s.n_eval = 0;
  s.n_chunk = 0;
  s.ready = false;
  s.parked = true;
  std::lock_guard<std::mutex> lk(mu_);
  ++counters_.preemptions;
}

Engine::Secured Engine::secure(Slot& s, int64_t n) {
  BlockTable& t = *s.session->kv_blocks();
  while (!kv_pool_->reserve(t, n).ok()) {
    if (Slot* v = victim(s)) {
      preempt(*v);
      continue;
    }
    for (auto& o : slots_)
      if (o.get() != &s && o->req && o->session->kv_blocks()->size() > 0) return Secured::wait;
    return Secured::full;
  }
  return Secured::ok;
}

int64_t Engine::room(Slot& s, int64_t n) {
  BlockTable& t = *s.session->kv_blocks();
  const int64_t past = s.session->n_past();
  for (;;) {
    const int64_t fit = t.rows() + int64_t{kv_pool_->available()} * kv_pool_->block_size() - past;
    const int64_t k = std::min(n, fit);
    if (k >= 1 && kv_pool_->reserve(t, past + k).ok()) return k;
    Slot* v = victim(s);
    if (!v) return 0;
    preempt(*v);
  }
}

// Nothing ran: the oldest running sequence waits for blocks that younger ones hold (or that it
// can never have). Free them, or end it.
void Engine::unstick() {
  Slot* oldest = nullptr;
  for (auto& o : slots_)
    if (o->req && !o->parked && (!oldest || o->age < oldest->age)) oldest = o.get();
  if (!oldest) return;
  Slot* youngest = nullptr;
  for (auto& o : slots_)
    if (o.get() != oldest && o->req && !o->parked && o->session->kv_blocks()->size() > 0 &&
        (!youngest || o->age > youngest->age))
      youngest = o.get();
  if (!youngest) {
    finish(*oldest, FinishReason::error,
           "the sequence needs more KV than the budget holds (" + format_bytes(kv_pool_->bytes()) + ")");
  } else if (wants_prompt_rows(youngest->req->p)) {
    finish(*youngest, FinishReason::error, "KV budget exhausted (" + format_bytes(kv_pool_->bytes()) + ")");
  } else {
    preempt(*youngest);
  }
}

void Engine::committed(Slot& s) {
  const int n = s.session->n_past();
  kv_pool_->commit(*s.session->kv_blocks(), std::span<const int32_t>(s.seq.data(), static_cast<size_t>(n)));
}

void Engine::checkpoint(Slot& s) {
  if (!kv_pool_ || !kv_pool_->checkpoints_on()) return;
  if (Status st = s.session->checkpoint(); !st.ok())  // the prefix is recomputed later instead
    std::fprintf(stderr, "strata: KV checkpoint not saved: %s\n", st.message().c_str());
}

void Engine::kv_metrics(const EngineCounters& c, std::string* o) const {
  const KvPoolStats k = kv_pool_->stats();
  auto counter = [&](const char* n, const char* help, double v) {
    prometheus_scalar(n, "counter", help, v, o);
  };
  auto gauge = [&](const char* n, const char* help, double v) { prometheus_scalar(n, "gauge", help, v, o); };
  gauge("strata_kv_blocks_total", "KV pool blocks", static_cast<double>(k.blocks.total));
  gauge("strata_kv_blocks_used", "KV blocks referenced by a running sequence",
        static_cast<double>(k.blocks.used));
  gauge("strata_kv_blocks_free", "KV blocks free", static_cast<double>(k.blocks.free));
  gauge("strata_kv_blocks_cached", "KV blocks unreferenced but cached (prefix cache, LRU)",
        static_cast<double>(k.blocks.cached));
  gauge("strata_kv_blocks_shared", "KV blocks referenced by more than one sequence",
        static_cast<double>(k.blocks.shared));
  gauge("strata_kv_block_size", "positions per KV block", k.block_size);
  const double asked = static_cast<double>(c.prompt_tokens_cached + c.prompt_tokens_prefilled);
  gauge("strata_prefix_cache_hit_rate", "prompt tokens whose KV came from the prefix cache, of all admitted",
        asked > 0 ? static_cast<double>(c.prompt_tokens_cached) / asked : 0.0);
  counter("strata_prompt_tokens_cached_total", "prompt tokens whose KV came from the prefix cache",
          static_cast<double>(c.prompt_tokens_cached));
  counter("strata_prompt_tokens_prefilled_total", "prompt tokens prefilled (not in the prefix cache)",
          static_cast<double>(c.prompt_tokens_prefilled));
  counter("strata_recomputed_tokens_total", "tokens evaluated again after a preemption",
          static_cast<double>(c.recomputed_tokens));
  counter("strata_preemptions_total", "sequences preempted (KV dropped, recomputed later)",
          static_cast<double>(c.preemptions));
  gauge("strata_kv_sequences", "sequences holding KV blocks after the last scheduler turn", c.kv_sequences);
  gauge("strata_kv_sequences_max", "the most sequences holding KV blocks after any turn", c.kv_sequences_max);
  counter("strata_kv_blocks_evicted_total", "cached KV blocks evicted for new ones",
          static_cast<double>(k.blocks.evicted));
  // Labelled families: one # HELP / # TYPE, a line per label value.
  auto family = [&](const char* n, const char* type, const char* help, const char* label,
                    const std::vector<std::pair<std::string, double>>& rows) {
    *o += std::string("# HELP ") + n + " " + help + "\n# TYPE " + n + " " + type + "\n";
    char b[64];
    for (const auto& [l, v] : rows) {
      std::snprintf(b, sizeof b, "%.17g", v);
      *o += std::string(n) + "{" + label + "=\"" + l + "\"} " + b + "\n";
    }
  };
  const KvSpillStats& sp = k.spill;
  const double bb = static_cast<double>(k.block_bytes);
  const double pool_blocks = static_cast<double>(k.blocks.used + k.blocks.cached);
  family("strata_kv_tier_blocks", "gauge", "KV blocks held per tier (pool: used + cached)", "tier",
         {{"pool", pool_blocks},
          {"ram", static_cast<double>(sp.ram_blocks)},
          {"ssd", static_cast<double>(sp.disk_blocks)}});
  family("strata_kv_tier_bytes", "gauge", "KV bytes held per tier (pool: its blocks in use or cached)",
         "tier",
         {{"pool", pool_blocks * bb},
          {"ram", static_cast<double>(sp.ram_bytes)},
          {"ssd", static_cast<double>(sp.disk_bytes)}});
  family("strata_kv_tier_hits_total", "counter", "prefix blocks found per tier (RAM / SSD: loaded back)",
         "tier",
         {{"pool", static_cast<double>(k.pool_hits)},
          {"ram", static_cast<double>(sp.ram_hits)},
          {"ssd", static_cast<double>(sp.disk_hits)}});
  counter("strata_kv_blocks_loaded_total", "prefix blocks loaded back from RAM or SSD",
          static_cast<double>(sp.ram_hits + sp.disk_hits));
  counter("strata_kv_blocks_recomputed_total",
          "prefix blocks found in RAM or SSD but recomputed (the cost model predicted it cheaper)",
          static_cast<double>(sp.recomputed_blocks));
  family("strata_kv_spilled_bytes_total", "counter", "KV bytes spilled into a tier (pool to RAM, on to SSD)",
         "tier",
         {{"ram", static_cast<double>(sp.spilled_ram_bytes)},
          {"ssd", static_cast<double>(sp.spilled_disk_bytes)}});
  counter("strata_kv_blocks_dropped_total", "evicted KV blocks lost (no tier below had room)",
          static_cast<double>(sp.dropped_blocks));
  counter("strata_kv_load_errors_total", "prefix-cache files rejected on a read (recomputed)",
          static_cast<double>(sp.load_errors));
  family("strata_kv_cost_decisions_total", "counter",
         "prefix runs found in RAM / SSD, by the cost model's choice (load them or recompute them)", "choice",
         {{"load", static_cast<double>(sp.load_decisions)},
          {"recompute", static_cast<double>(sp.recompute_decisions)}});
  gauge("strata_kv_checkpoints", "window-ring checkpoints kept (models with sliding-window layers)",
        static_cast<double>(k.checkpoints.count));
  gauge("strata_kv_checkpoint_bytes", "bytes of the window-ring checkpoints kept",
        static_cast<double>(k.checkpoints.bytes));
  counter("strata_kv_checkpoints_saved_total", "window-ring checkpoints saved",
          static_cast<double>(k.checkpoints.saved));
  counter("strata_kv_checkpoints_restored_total", "prefixes continued from a window-ring checkpoint",
          static_cast<double>(k.checkpoints.restored));
  counter("strata_kv_loads_beat_recompute_total",
          "loads whose measured time was at most the recompute time predicted for the same run",
          static_cast<double>(sp.loads_beat_recompute));
  family("strata_kv_load_seconds_total", "counter",
         "time of the loads the cost model chose, predicted and measured", "kind",
         {{"predicted", sp.predicted_load_s}, {"measured", sp.measured_load_s}});
  gauge("strata_kv_ram_budget_bytes", "bytes the RAM tier may hold (--cache-ram)",
        static_cast<double>(sp.ram_budget));
  gauge("strata_kv_ssd_budget_bytes",
        "bytes the SSD tier's files may take (--prefix-cache-dir-size; 0: no limit)",
        static_cast<double>(sp.disk_budget));
  counter("strata_kv_ssd_evicted_blocks_total",
          "SSD block files deleted, least recently used first, past --prefix-cache-dir-size",
          static_cast<double>(sp.disk_evicted));
  gauge("strata_kv_ssd_queue_blocks", "spilled KV blocks waiting for (or in) their SSD write",
        static_cast<double>(sp.queue_blocks));
  counter("strata_kv_ssd_queue_hits_total", "prefix blocks loaded from the SSD write queue (not yet written)",
          static_cast<double>(sp.queue_hits));
  counter("strata_kv_ssd_queue_waits_total", "spills that found the SSD write queue full and waited",
          static_cast<double>(sp.queue_waits));
  counter("strata_kv_ssd_queue_wait_seconds_total", "time spills waited for room in the SSD write queue",
          sp.queue_wait_s);
  counter("strata_kv_ssd_write_errors_total", "SSD block writes that failed (the block dropped)",
          static_cast<double>(sp.write_errors));
  counter("strata_kv_spill_blocks_total", "evicted KV blocks spilled (copied out of the pool)",
          static_cast<double>(sp.spill_blocks));
  counter("strata_kv_spill_seconds_total",
          "scheduler-thread time spent spilling evicted blocks (copy out, RAM tier, SSD queue; the SSD write "
          "itself runs on a writer thread)",
          sp.spill_s);
  gauge("strata_kv_load_bandwidth_ram", "bytes/s of loads from RAM (measured, else the prior)", sp.ram_bw);
  gauge("strata_kv_load_bandwidth_ssd", "bytes/s of loads from SSD (measured, else the prior)", sp.disk_bw);
  gauge("strata_kv_prefill_seconds_per_token",
        "measured prefill time per token (the cost model's recompute side)", sp.prefill_s_per_token);
  std::vector<std::pair<std::string, double>> part_bytes, part_used;
  for (const KvPartBytes& p : k.parts) {
    part_bytes.emplace_back(p.name, static_cast<double>(p.bytes));
    part_used.emplace_back(p.name, static_cast<double>(p.used_bytes));
  }
  family("strata_kv_part_bytes", "gauge", "KV pool bytes per part (all layers)", "part", part_bytes);
  family("strata_kv_part_used_bytes", "gauge", "KV pool bytes per part in blocks referenced by a sequence",
         "part", part_used);
  gauge("strata_kv_fragmentation",
        "rows of referenced KV blocks no sequence asked for, of all their rows (a paged pool has no external "
        "fragmentation)",
        k.fragmentation);
  gauge("strata_kv_fragmentation_avg",
        "strata_kv_fragmentation averaged over the pool's life (time-weighted)", k.fragmentation_avg);
}

}  // namespace strata
