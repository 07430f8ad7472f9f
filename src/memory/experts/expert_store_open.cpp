// Opening the expert store: over any backing (ExpertStore::open(ExpertBacking)), over a GGUF (its
// catalog, bundle, routers and dense weights), and expert_store_open with the policy named in the
// options (kept apart from expert_store.cpp so code that injects its own policy does not link the
// policy set).
#include <unistd.h>

#include <algorithm>

#include "memory/experts/expert_store.h"
#include "memory/experts/pack.h"
#include "memory/tier/mem_resident.h"

namespace strata {

Result<std::unique_ptr<ExpertStore>> ExpertStore::open(const GgufFile& f, int n_layer, int n_expert,
                                                       int n_used, const ExpertStoreOptions& o,
                                                       std::unique_ptr<ExpertPolicy> policy,
                                                       IoOpener opener) {
  if (n_used < 1 || n_used > n_expert)
    return err("expert store: n_used %d must be in [1, n_expert %d]", n_used, n_expert);
  ExpertBacking b;
  STRATA_ASSIGN(b.catalog, ExpertCatalog::build(f, n_layer, n_expert));
  if (o.budget_bytes > 0) {
    if (!o.expert_file.empty()) {
      STRATA_ASSIGN(PackIndex ix, pack_read_index(o.expert_file));
      STRATA_TRY(b.catalog.attach_bundle(ix, f));
    }
    if (o.prefetch && o.lookahead > 0) {
      STRATA_ASSIGN(RouterLookahead r, RouterLookahead::build(f, n_layer, n_expert, n_used));
      b.routers = std::make_unique<RouterLookahead>(std::move(r));
    }
    const bool load = o.dense_resident, direct = o.direct_io;
    b.prepare_dense = [&f, load, direct]() -> Result<uint64_t> {
      STRATA_TRY(gguf_advise_streamed_experts(f, /*dense_willneed=*/!load));
      if (!load) return uint64_t{0};
      // The model's own file, not the opener's: these are the mapping's bytes, not expert reads.
      STRATA_ASSIGN(std::unique_ptr<IoFile> model_file, io_open_file(f.path(), direct));
      return gguf_load_dense_resident(f, *model_file);
    };
  }
  return open(std::move(b), n_used, o, std::move(policy), std::move(opener));
}

Result<std::unique_ptr<ExpertStore>> ExpertStore::open(ExpertBacking b, int n_used,
                                                       const ExpertStoreOptions& o,
                                                       std::unique_ptr<ExpertPolicy> policy,
                                                       IoOpener opener) {
  const int n_layer = b.catalog.n_layer(), n_expert = b.catalog.n_expert();
  if (n_used < 1 || n_used > n_expert)
    return err("expert store: n_used %d must be in [1, n_expert %d]", n_used, n_expert);
  std::unique_ptr<ExpertStore> s(new ExpertStore());
  s->catalog_ = std::move(b.catalog);
  s->opts_ = o;
  s->n_layer_ = n_layer;
  s->n_expert_ = n_expert;
  s->n_used_ = n_used;
  s->resident_ = o.budget_bytes == 0;
  s->stats_.init(n_layer, n_expert);
  s->profile_counts_.assign(static_cast<size_t>(n_layer) * n_expert, 0);
  if (!o.profile_path.empty() && ::access(o.profile_path.c_str(), F_OK) == 0) {  // absent: written at exit
    auto loaded = expert_profile_load(o.profile_path, n_layer, n_expert, &s->profile_counts_);
    if (!loaded.ok()) return loaded.error();
  }

  ExpertStoreInfo& i = s->info_;
  i.backing_path = s->catalog_.path();
  i.n_layer = n_layer;
  i.n_expert = n_expert;
  i.n_used = n_used;
  i.routed_bytes = s->catalog_.routed_bytes();
  i.dense_bytes = s->catalog_.dense_bytes();
  i.resident = s->resident_;
  i.budget_bytes = o.budget_bytes;

  if (!o.routing_trace_path.empty()) {
    s->trace_ = std::fopen(o.routing_trace_path.c_str(), "w");
    if (!s->trace_) return err("cannot write routing trace '%s'", o.routing_trace_path.c_str());
  }
  s->cur_sel_.assign(static_cast<size_t>(n_expert), 0);
  s->mark_.assign(static_cast<size_t>(n_expert), 0);
  i.slot_bytes = s->catalog_.slot_bytes();
  if (s->resident_) {
    i.policy = "resident";
    i.tier_bytes = i.routed_bytes;
    return s;
  }

  if (!policy) return err("expert store: no policy");
  if (o.io_threads < 1 || o.io_threads > 256)
    return err("expert store: --io-threads %d must be in [1, 256]", o.io_threads);
  if (o.io_depth < 1 || o.io_depth > 65536)
    return err("expert store: --io-depth %d must be in [1, 65536]", o.io_depth);
  if (o.lookahead < 0 || o.lookahead > n_layer)
    return err("expert store: lookahead %d out of range", o.lookahead);
  if (o.predict != "lookahead" && o.predict != "history" && o.predict != "union")
    return err("expert store: --predict '%s' must be lookahead, history or union", o.predict.c_str());
  s->predict_lookahead_ = o.predict != "history";
  s->predict_history_ = o.predict != "lookahead";
  s->policy_ = std::move(policy);
  IoBackend backend;
  if (!io_backend_from_name(o.io_backend, &backend))
    return err("expert store: --io-backend '%s' must be auto, uring, threads or sync", o.io_backend.c_str());
  bool all_fds = true;
  for (const ExpertBackingFile& bf : s->catalog_.backing_files()) {
    auto file = opener ? opener(bf.path, o.direct_io) : io_open_file(bf.path, o.direct_io);
    if (!file.ok()) return file.error();
    if (file.value()->opened_size() != bf.size)
      return err("%s: backing file is %llu bytes but %llu were expected (file changed?)", bf.path.c_str(),
                 static_cast<unsigned long long>(file.value()->opened_size()),
                 static_cast<unsigned long long>(bf.size));
    all_fds = all_fds && file.value()->fd() >= 0;
    s->files_.push_back(std::move(file).value());
  }
  if (s->files_.empty()) return err("expert store: %s has no backing file", s->catalog_.path().c_str());
  // io_uring reads every segment's file by its descriptor: auto takes the pread threads otherwise.
  if (backend == IoBackend::io_backend_auto && !all_fds) backend = IoBackend::io_backend_threads;
  if (b.prepare_dense) {
    STRATA_ASSIGN(s->dense_loaded_, b.prepare_dense());
  }
  const size_t slot = s->catalog_.slot_bytes();
  const uint64_t all = uint64_t{slot} * static_cast<uint64_t>(s->catalog_.n_present_layers()) * n_expert;
  STRATA_ASSIGN(s->tier_, make_ram_tier(std::min(o.budget_bytes, all), slot, n_used));
  if (o.prefetch && o.lookahead > 0) s->lookahead_ = std::move(b.routers);

  const int n = s->tier_->n_slots();
  s->slots_.resize(static_cast<size_t>(n));
  s->free_.reserve(static_cast<size_t>(n));
  for (int k = n - 1; k >= 0; --k) s->free_.push_back(k);
  s->cand_keys_.reserve(static_cast<size_t>(n));
  s->cand_slots_.reserve(static_cast<size_t>(n));
  s->slot_of_.assign(static_cast<size_t>(n_layer) * n_expert, -1);
  s->pred_.assign(static_cast<size_t>(n_layer) * n_expert, 0);
  s->pred_valid_.assign(static_cast<size_t>(n_layer), 0);
  s->last_use_.assign(static_cast<size_t>(n_layer) * n_expert, -1);
  i.backing_path = s->catalog_.backing_path();
  i.expert_file = o.expert_file;
  i.policy = s->policy_->name();
  i.tier = s->tier_->name();
  i.direct_io = s->files_[0]->direct();
  i.prefetch = o.prefetch;
  i.n_slots = n;
  i.tier_bytes = s->tier_->bytes();
  i.io_threads = o.io_threads;
  i.io_depth = o.io_depth;
  i.lookahead = o.prefetch && s->lookahead_ ? o.lookahead : 0;
  s->pending_urgent_.reserve(static_cast<size_t>(n));
  s->pending_normal_.reserve(static_cast<size_t>(n));
  ExpertStore* self = s.get();
  STRATA_ASSIGN(s->io_, io_engine_make(backend, *s->files_[0], o.io_threads, o.io_depth,
                                       [self](uint32_t id, const Status& st, uint64_t bytes, double dt) {
                                         self->read_done(id, st, bytes, dt);
                                       }));
  i.io_backend = s->io_->name();
  i.io_overhead_bytes = s->io_->overhead_bytes();
  STRATA_TRY(s->warm_start());
  return s;
}

namespace {

Result<std::unique_ptr<ExpertPolicy>> policy_for(int n_layer, int n_expert, int n_used,
                                                 const ExpertStoreOptions& o) {
  std::unique_ptr<ExpertPolicy> policy;
  if (o.budget_bytes == 0) return policy;
  PolicyOptions po;
  po.n_layers = n_layer;
  po.n_experts = n_expert;
  // A profile that does not exist yet is written at exit (counts of this run).
  if (!o.profile_path.empty() && ::access(o.profile_path.c_str(), F_OK) == 0) {
    std::vector<uint64_t> counts(static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert), 0);
    STRATA_ASSIGN(po.static_hot, expert_profile_load(o.profile_path, n_layer, n_expert, &counts));
    int layers = 0;  // layers the profile saw (dense layers have none)
    for (int l = 0; l < n_layer; ++l)
      for (int e = 0; e < n_expert; ++e)
        if (counts[static_cast<size_t>(l) * n_expert + e]) {
          ++layers;
          break;
        }
    po.seed_counts = expert_profile_seed(counts, static_cast<double>(layers) * n_used * po.rerank_interval);
  }
  if (o.policy == "static" && po.static_hot.empty())
    return err(
        "--expert-policy static needs --expert-profile FILE with activation counts (the hot set); "
        "record one first, e.g. with --expert-policy adaptive --expert-profile FILE");
  STRATA_ASSIGN(policy, make_expert_policy(o.policy, po));
  return policy;
}

}  // namespace

Result<std::unique_ptr<ExpertStore>> expert_store_open(const GgufFile& f, int n_layer, int n_expert,
                                                       int n_used, const ExpertStoreOptions& o) {
  STRATA_ASSIGN(std::unique_ptr<ExpertPolicy> policy, policy_for(n_layer, n_expert, n_used, o));
  return ExpertStore::open(f, n_layer, n_expert, n_used, o, std::move(policy));
}

Result<std::unique_ptr<ExpertStore>> expert_store_open(ExpertBacking b, int n_used,
                                                       const ExpertStoreOptions& o) {
  STRATA_ASSIGN(std::unique_ptr<ExpertPolicy> policy,
                policy_for(b.catalog.n_layer(), b.catalog.n_expert(), n_used, o));
  return ExpertStore::open(std::move(b), n_used, o, std::move(policy));
}

}  // namespace strata
