#include "memory/experts/expert_store.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>

#include "base/clock.h"
#include "memory/tier/mem_resident.h"

namespace strata {

Status ExpertStore::warm_start() {
  std::vector<uint32_t> order;
  for (size_t i = 0; i < profile_counts_.size(); ++i)
    if (profile_counts_[i] && catalog_.layer(static_cast<int>(i / static_cast<size_t>(n_expert_))).present)
      order.push_back(static_cast<uint32_t>(i));
  if (order.empty()) return {};
  // Hottest first; ties in (layer, expert) order, as expert_profile_load ranks the static hot set.
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return profile_counts_[a] > profile_counts_[b]; });
  order.resize(std::min(order.size(), slots_.size()));
  const double t0 = now_seconds();
  {
    std::lock_guard<std::mutex> lk(mu_);
    warming_ = true;
    for (uint32_t i : order) {
      const int s = take_slot_locked(0);
      STRATA_ASSERT(s >= 0);  // order.size() <= free slots
      start_fill_locked(s,
                        {static_cast<int32_t>(i / static_cast<uint32_t>(n_expert_)),
                         static_cast<int32_t>(i % static_cast<uint32_t>(n_expert_))},
                        /*urgent=*/false, /*prefetch=*/false);
    }
  }
  flush();
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    bool filling = false;
    for (const Slot& slot : slots_) filling |= slot.state == SlotState::slot_filling;
    if (!filling) break;
    cv_.wait(lk);
  }
  warming_ = false;
  for (size_t s = 0; s < slots_.size(); ++s) {
    Slot& slot = slots_[s];
    if (slot.state != SlotState::slot_failed) continue;
    Status st =
        err_context("expert store: warm start from profile '" + opts_.profile_path + "'", slot.error.error());
    evict_locked(static_cast<int>(s));
    free_.push_back(static_cast<int32_t>(s));
    return st;
  }
  info_.warm_experts = static_cast<int>(order.size());
  info_.warm_seconds = now_seconds() - t0;
  return {};
}

ExpertStore::~ExpertStore() {
  io_.reset();  // join the readers before the slots they write go away
  if (trace_) std::fclose(trace_);
}

// ---------------------------------------------------------------------------------- reads

void ExpertStore::read_done(uint32_t s, const Status& read_st, uint64_t bytes, double dt) {
  Status st = read_st;
  if (st.ok() && catalog_.has_transform()) {  // FP4 parts to MXFP4, before anyone may use the slot
    ExpertKey k;
    {
      std::lock_guard<std::mutex> lk(mu_);
      k = slots_[s].key;
    }
    st = catalog_.transform(k.layer, k.expert, tier_->host_data(static_cast<int>(s)));
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    Slot& slot = slots_[s];
    ExpertTotals& t = stats_.totals();
    if (slot.prefetched) --prefetch_inflight_;
    if (st.ok() && warming_) {
      slot.state = SlotState::slot_ready;
      info_.warm_bytes += bytes;
    } else if (st.ok()) {
      slot.state = SlotState::slot_ready;
      t.reads++;
      t.bytes_read += bytes;
      t.read_s += dt;
      if (ExpertStepStats* cur = stats_.current()) cur->bytes_read += bytes;
    } else {
      t.read_errors++;
      slot.state = SlotState::slot_failed;
      slot.error = err_context("expert store: layer " + std::to_string(slot.key.layer) + " expert " +
                                   std::to_string(slot.key.expert),
                               st.error());
    }
  }
  cv_.notify_all();
}

void ExpertStore::flush() {
  // pending_* are the compute thread's (start_fill_locked runs there only), so they are read here
  // without mu_: the sync engine completes its reads inside submit() through read_done, which locks.
  if (pending_urgent_.empty() && pending_normal_.empty()) return;
  const double t0 = now_seconds();
  if (!pending_urgent_.empty()) io_->submit(pending_urgent_.data(), pending_urgent_.size(), /*urgent=*/true);
  if (!pending_normal_.empty()) io_->submit(pending_normal_.data(), pending_normal_.size(), /*urgent=*/false);
  const double dt = now_seconds() - t0;  // the compute thread's time in submit (sync: the reads)
  std::lock_guard<std::mutex> lk(mu_);
  if (warming_) {  // before the first token: no stall, no submit statistics
    pending_urgent_.clear();
    pending_normal_.clear();
    return;
  }
  ExpertTotals& t = stats_.totals();
  for (const std::vector<IoJob>* q : {&pending_urgent_, &pending_normal_}) {
    t.io_submits += q->empty() ? 0 : 1;
    t.io_jobs += q->size();
  }
  add_stall_locked(dt);
  pending_urgent_.clear();
  pending_normal_.clear();
}

void ExpertStore::add_stall_locked(double dt) {
  stats_.totals().stall_s += dt;
  if (ExpertStepStats* step = stats_.current()) step->stall_s += dt;
}

// ---------------------------------------------------------------------------------- slots

bool ExpertStore::upcoming_locked(const Slot& slot) const {
  const ExpertKey k = slot.key;
  if (cur_layer_ < 0 || k.layer <= cur_layer_ || k.layer > cur_layer_ + std::max(opts_.lookahead, 1))
    return false;
  return slot.prefetched || (pred_valid_[static_cast<size_t>(k.layer)] && pred_[idx(k.layer, k.expert)]);
}

void ExpertStore::evict_locked(int s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  ExpertTotals& t = stats_.totals();
  if (slot.state == SlotState::slot_ready) {
    t.evictions++;
    if (slot.prefetched) {
      t.prefetch_wasted++;
      t.prefetch_wasted_bytes += catalog_.expert_bytes(slot.key.layer);
    }
  }
  policy_->on_evict(slot.key);
  slot_of_[idx(slot.key.layer, slot.key.expert)] = -1;
  slot = Slot{};
}

int ExpertStore::take_slot_locked(int level) {
  if (!free_.empty()) {
    const int s = free_.back();
    free_.pop_back();
    return s;
  }
  cand_keys_.clear();
  cand_slots_.clear();
  bool transient = false;
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Slot& slot = slots_[s];
    if (slot.state == SlotState::slot_failed && slot.pins == 0) {
      evict_locked(static_cast<int>(s));  // a failed read holds nothing worth keeping
      return static_cast<int>(s);
    }
    if (slot.state != SlotState::slot_ready || slot.pins > 0) continue;
    if (level < 2 && slot.key.layer == cur_layer_ && cur_sel_[static_cast<size_t>(slot.key.expert)]) continue;
    if (level < 1 && upcoming_locked(slot)) continue;
    if (slot.transient && !transient) {  // non-admitted experts go first
      transient = true;
      cand_keys_.clear();
      cand_slots_.clear();
    }
    if (transient && !slot.transient) continue;
    cand_keys_.push_back(slot.key);
    cand_slots_.push_back(static_cast<int32_t>(s));
  }
  if (cand_slots_.empty()) return -1;
  const size_t v = cand_slots_.size() == 1 ? 0 : policy_->choose_victim(cand_keys_, tick_);
  STRATA_ASSERT(v < cand_slots_.size());
  const int s = cand_slots_[v];
  evict_locked(s);
  return s;
}

void ExpertStore::start_fill_locked(int s, ExpertKey k, bool urgent, bool prefetch) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  slot = Slot{};
  slot.key = k;
  slot.state = SlotState::slot_filling;
  slot.prefetched = prefetch;
  slot.urgent = urgent;
  slot.transient = !policy_->admit(k, tick_);
  slot_of_[idx(k.layer, k.expert)] = s;
  policy_->on_insert(k, tick_);
  if (prefetch) {
    ++prefetch_inflight_;
    stats_.totals().prefetch_issued++;
  }
  IoJob job;
  job.id = static_cast<uint32_t>(s);
  ExpertSegment seg[kMaxExpertSegments];
  const int n = catalog_.fill_segments(k.layer, k.expert, seg);
  uint8_t* base = tier_->host_data(s);
  IoSegment whole[IoJob::kMaxSegments];
  for (int i = 0; i < n; ++i)
    whole[i] = IoSegment{base + seg[i].slot_off, seg[i].off, seg[i].len,
                         files_[static_cast<size_t>(seg[i].file)].get()};
  job.n = io_split_segments(whole, n, opts_.io_chunk, job.seg, IoJob::kMaxSegments);
  (urgent ? pending_urgent_ : pending_normal_).push_back(job);
}

// ---------------------------------------------------------------------------------- steps

void ExpertStore::begin_step(int64_t n_tokens) {
  std::lock_guard<std::mutex> lk(mu_);
  tick0_ = tick_;
  tick_ += static_cast<uint64_t>(n_tokens);
  stats_.begin_step(static_cast<int64_t>(tick0_), n_tokens);
}

void ExpertStore::end_step() {
  std::lock_guard<std::mutex> lk(mu_);
  cur_layer_ = -1;
  if (trace_) std::fflush(trace_);
}

void ExpertStore::write_trace_locked(int layer, int64_t n, const int32_t* sel, const float* wts, int k) {
  for (int64_t t = 0; t < n; ++t) {
    std::fprintf(trace_, "{\"token_idx\":%" PRIu64 ",\"layer\":%d,\"experts\":[",
                 tick0_ + static_cast<uint64_t>(t), layer);
    // Choices a profile dropped (id -1) are not part of the record.
    for (int j = 0; j < k; ++j)
      if (sel[t * k + j] >= 0) std::fprintf(trace_, "%s%d", j ? "," : "", sel[t * k + j]);
    std::fputs("],\"weights\":[", trace_);
    for (int j = 0; j < k; ++j)
      if (sel[t * k + j] >= 0)
        std::fprintf(trace_, "%s%.9g", j ? "," : "", static_cast<double>(wts[t * k + j]));
    if (!la_trace_.empty()) {
      std::fputs("],\"lookahead\":[", trace_);
      for (size_t d = 0; d < la_trace_.size(); ++d) {
        std::fputs(d ? ",[" : "[", trace_);
        for (size_t j = 0; j < la_trace_[d].size(); ++j)
          std::fprintf(trace_, "%s%d", j ? "," : "", la_trace_[d][j]);
        std::fputs("]", trace_);
      }
    }
    std::fputs("]}\n", trace_);
  }
}

void ExpertStore::on_route(int layer, const float* x, int64_t n, const int32_t* sel, const float* wts,
                           int k) {
  route_locked(layer, x, n, sel, wts, k);
  if (!resident_) flush();  // the layer's misses (urgent) and predictions, each in one submission
}

void ExpertStore::route_locked(int layer, const float* x, int64_t n, const int32_t* sel, const float* wts,
                               int k) {
  std::lock_guard<std::mutex> lk(mu_);
  la_trace_.clear();
  std::fill(cur_sel_.begin(), cur_sel_.end(), 0);
  for (int64_t t = 0; t < n; ++t) {
    for (int j = 0; j < k; ++j) {
      const int e = sel[t * k + j];
      if (e < 0) continue;  // dropped by the sequence's profile
      STRATA_ASSERT(e < n_expert_);
      stats_.count_activation(layer, e);
      cur_sel_[static_cast<size_t>(e)] = 1;
      if (!last_use_.empty()) last_use_[idx(layer, e)] = static_cast<int64_t>(tick0_) + t;
      if (policy_) policy_->on_access({layer, e}, tick0_ + static_cast<uint64_t>(t));
    }
  }
  cur_layer_ = layer;
  if (trace_ && (resident_ || !lookahead_ || n != 1)) write_trace_locked(layer, n, sel, wts, k);
  if (opts_.on_route) opts_.on_route(tick0_, layer, n, sel, k);
  ExpertStepStats* step = stats_.current();
  ExpertTotals& tot = stats_.totals();
  if (resident_) {
    for (int e = 0; e < n_expert_; ++e) {
      if (!cur_sel_[static_cast<size_t>(e)]) continue;
      tot.hits++;
      if (step) step->hits++;
    }
    return;
  }
  if (pred_valid_[static_cast<size_t>(layer)]) {
    for (int e = 0; e < n_expert_; ++e) {
      const bool p = pred_[idx(layer, e)] != 0, a = cur_sel_[static_cast<size_t>(e)] != 0;
      tot.pred_true_pos += p && a;
      tot.pred_false_pos += p && !a;
      tot.pred_false_neg += !p && a;
    }
    pred_valid_[static_cast<size_t>(layer)] = 0;
  }
  for (int e = 0; e < n_expert_; ++e) {
    if (!cur_sel_[static_cast<size_t>(e)]) continue;
    const int s = slot_of_[idx(layer, e)];
    Slot* slot = s >= 0 ? &slots_[static_cast<size_t>(s)] : nullptr;
    if (slot && slot->prefetched && slot->state != SlotState::slot_failed) {
      slot->prefetched = false;
      tot.prefetch_used++;
    }
    if (slot && slot->state == SlotState::slot_ready) {
      tot.hits++;
      if (step) step->hits++;
    } else if (slot && slot->state == SlotState::slot_filling) {
      tot.late++;
      if (step) step->late++;
      if (!slot->urgent && io_->promote(static_cast<uint32_t>(s))) slot->urgent = true;
    } else {
      tot.misses++;
      if (step) step->misses++;
      if (opts_.prefetch && !(slot && slot->pins > 0)) {
        // Start every miss of this layer now: the reads overlap each other and the compute of
        // the experts that are already resident. Without a slot at hand, acquire() will wait.
        if (slot) {  // failed read: retry
          evict_locked(s);
          free_.push_back(s);
        }
        int ns = take_slot_locked(0);
        if (ns < 0) ns = take_slot_locked(1);
        if (ns >= 0) start_fill_locked(ns, {layer, e}, /*urgent=*/true, /*prefetch=*/false);
      }
    }
  }
  // Look-ahead only on decode steps: a prompt step's union of predictions spans most experts of the
  // next layer and would evict the working set (measured: 726 MiB wasted on a 30-token prompt);
  // its own misses are already read in parallel above.
  if (lookahead_ && n == 1) {
    prefetch_locked(layer, x, n);
    if (trace_) write_trace_locked(layer, n, sel, wts, k);  // with the predictions
  }
}

void ExpertStore::prefetch_locked(int layer, const float* x, int64_t n) {
  for (int d = 1; d <= opts_.lookahead; ++d) {
    const int l = layer + d;
    if (l >= n_layer_ || !lookahead_->has(l) || !catalog_.layer(l).present) continue;
    std::fill(mark_.begin(), mark_.end(), 0);
    if (predict_lookahead_) lookahead_->predict(l, x, n, mark_.data(), opts_.lookahead_top);
    if (predict_history_)  // the previous token's experts of layer l
      for (int e = 0; e < n_expert_; ++e)
        if (last_use_[idx(l, e)] == static_cast<int64_t>(tick0_) - 1) mark_[static_cast<size_t>(e)] = 1;
    std::copy(mark_.begin(), mark_.end(), pred_.begin() + static_cast<std::ptrdiff_t>(idx(l, 0)));
    if (trace_) {
      la_trace_.resize(static_cast<size_t>(d));
      for (int e = 0; e < n_expert_; ++e)
        if (mark_[static_cast<size_t>(e)]) la_trace_[static_cast<size_t>(d - 1)].push_back(e);
    }
    pred_valid_[static_cast<size_t>(l)] = 1;
  }
  // Issue nearest layers first; stop at the depth limit or when nothing may be evicted.
  for (int d = 1; d <= opts_.lookahead; ++d) {
    const int l = layer + d;
    if (l >= n_layer_ || !pred_valid_[static_cast<size_t>(l)]) continue;
    for (int e = 0; e < n_expert_; ++e) {
      if (!pred_[idx(l, e)] || slot_of_[idx(l, e)] >= 0) continue;
      if (prefetch_inflight_ >= opts_.io_depth) return;
      if (free_.empty() && !policy_->admit({l, e}, tick_)) continue;
      const int s = take_slot_locked(0);
      if (s < 0) return;
      start_fill_locked(s, {l, e}, /*urgent=*/false, /*prefetch=*/true);
    }
  }
}

Result<ExpertViews> ExpertStore::acquire(int layer, int e) {
  STRATA_ASSERT(layer >= 0 && layer < n_layer_ && e >= 0 && e < n_expert_);
  if (resident_) {
    return ExpertViews{.gate = catalog_.view(layer, e, expert_part_gate, nullptr),
                       .up = catalog_.view(layer, e, expert_part_up, nullptr),
                       .down = catalog_.view(layer, e, expert_part_down, nullptr)};
  }
  std::unique_lock<std::mutex> lk(mu_);
  double t_wait = -1.0;
  int s = -1;
  for (;;) {
    s = slot_of_[idx(layer, e)];
    if (s < 0) {
      // Last resort (a prompt step whose layer wants more experts than there are slots):
      // evict an unpinned expert of this very layer; it is read again if still needed.
      for (int level = 0; level < 3 && s < 0; ++level) s = take_slot_locked(level);
      if (s >= 0) {
        start_fill_locked(s, {layer, e}, /*urgent=*/true, /*prefetch=*/false);
        lk.unlock();
        flush();  // sync: the read happens here, in this thread
        lk.lock();
        continue;
      }
    } else {
      Slot& slot = slots_[static_cast<size_t>(s)];
      if (slot.state == SlotState::slot_ready) break;
      if (slot.state == SlotState::slot_failed) {
        if (slot.prefetched) {  // a failed prefetch: retry as a demand read
          evict_locked(s);
          free_.push_back(s);
          continue;
        }
        Status st = slot.error;
        evict_locked(s);
        free_.push_back(s);
        return st.error();
      }
      if (!slot.urgent && io_->promote(static_cast<uint32_t>(s))) slot.urgent = true;
    }
    if (t_wait < 0) t_wait = now_seconds();
    cv_.wait(lk);
  }
  slots_[static_cast<size_t>(s)].pins++;
  if (t_wait >= 0) add_stall_locked(now_seconds() - t_wait);
  const uint8_t* base = tier_->host_data(s);
  return ExpertViews{.gate = catalog_.view(layer, e, expert_part_gate, base),
                     .up = catalog_.view(layer, e, expert_part_up, base),
                     .down = catalog_.view(layer, e, expert_part_down, base)};
}

int ExpertStore::wait_any(int layer, const int32_t* experts, int n) {
  STRATA_ASSERT(n >= 1);
  if (resident_) return 0;
  std::unique_lock<std::mutex> lk(mu_);
  double t_wait = -1.0;
  for (;;) {
    for (int i = 0; i < n; ++i) {
      const int s = slot_of_[idx(layer, experts[i])];
      if (s < 0) return i;  // no read under way: acquire() starts one (and waits there)
      Slot& slot = slots_[static_cast<size_t>(s)];
      if (slot.state != SlotState::slot_filling) {
        if (t_wait >= 0) add_stall_locked(now_seconds() - t_wait);
        return i;
      }
      if (!slot.urgent && io_->promote(static_cast<uint32_t>(s))) slot.urgent = true;
    }
    if (t_wait < 0) t_wait = now_seconds();
    cv_.wait(lk);
  }
}

void ExpertStore::release(int layer, int e) {
  if (resident_) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const int s = slot_of_[idx(layer, e)];
    STRATA_ASSERT(s >= 0 && slots_[static_cast<size_t>(s)].pins > 0);
    if (--slots_[static_cast<size_t>(s)].pins > 0) return;
  }
  cv_.notify_all();
}

// ---------------------------------------------------------------------------------- reports

ExpertStats ExpertStore::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

ExpertTotals ExpertStore::totals() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_.totals();
}

Status ExpertStore::write_stats(const std::string& path) const {
  return stats().write(path, info_);
}

Status ExpertStore::save_profile(const std::string& path) const {
  ExpertStats s = stats();
  ExpertStats merged;
  merged.init(n_layer_, n_expert_);
  for (int l = 0; l < n_layer_; ++l) {
    for (int e = 0; e < n_expert_; ++e) {
      merged.add_activation(l, e, s.activation(l, e) + profile_counts_[idx(l, e)]);
    }
  }
  return write_text_file(path, merged.to_csv());
}

uint64_t ExpertStore::expert_resident_bytes() const {
  if (!resident_) return tier_->resident_bytes();
  uint64_t b = 0;
  for (int l = 0; l < n_layer_; ++l) {
    const ExpertLayerInfo& li = catalog_.layer(l);
    if (!li.present) continue;
    for (int p = 0; p < expert_part_count; ++p)
      b += mem_resident_bytes(li.part[p].slice0.data, li.part[p].stride * static_cast<size_t>(n_expert_));
  }
  return b;
}

int ExpertStore::resident_count() const {
  std::lock_guard<std::mutex> lk(mu_);
  int n = 0;
  for (const Slot& s : slots_) n += s.state == SlotState::slot_ready ? 1 : 0;
  return n;
}

bool ExpertStore::is_resident(int layer, int e) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (resident_) return true;
  const int s = slot_of_[idx(layer, e)];
  return s >= 0 && slots_[static_cast<size_t>(s)].state == SlotState::slot_ready;
}

}  // namespace strata
