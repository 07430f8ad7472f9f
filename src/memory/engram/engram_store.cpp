#include "memory/engram/engram_store.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "base/assert.h"
#include "base/units.h"

namespace strata {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Bytes the device transfers for [off, off + len): the aligned cover, cut at the end of the file.
uint64_t cover_bytes(uint64_t off, uint64_t len, uint64_t file_size) {
  return std::min(io_align_up(off + len), std::max(file_size, io_align_down(off))) - io_align_down(off);
}

}  // namespace

Result<std::unique_ptr<EngramStore>> EngramStore::open(std::vector<EngramTable> tables,
                                                       const EngramStoreOptions& o, IoOpener opener) {
  if (tables.empty()) return err("engram store: no Engram tables");
  if (o.budget_bytes == 0) return err("engram store: --engram-budget must be > 0");
  if (o.io_threads < 1 || o.io_threads > 256)
    return err("engram store: %d I/O threads (1..256)", o.io_threads);
  if (!opener) opener = io_open_file;
  std::unique_ptr<EngramStore> s(new EngramStore());
  s->opts_ = o;
  s->tables_ = std::move(tables);
  EngramStoreInfo& info = s->info_;
  info.n_tables = static_cast<int>(s->tables_.size());
  info.budget_bytes = o.budget_bytes;
  info.prefetch = o.prefetch;
  info.io_threads = o.io_threads;
  uint32_t max_row = 0, max_vb = 0, max_sb = 0;
  for (const EngramTable& t : s->tables_) {
    if (t.rows <= 0 || t.rows >= (int64_t{1} << 48) || t.head_dim <= 0 || t.head_dim % 32)
      return err("engram store: %s: %lld rows x %d columns is not a valid Engram table", t.name.c_str(),
                 static_cast<long long>(t.rows), t.head_dim);
    info.table_bytes += t.bytes();
    max_row = std::max(max_row, t.row_bytes());
    max_vb = std::max(max_vb, t.value_row_bytes());
    max_sb = std::max(max_sb, t.scale_row_bytes());
    auto it = std::find(info.paths.begin(), info.paths.end(), t.path);
    if (it == info.paths.end()) {
      STRATA_ASSIGN(auto f, opener(t.path, o.direct_io));
      s->files_.push_back(std::move(f));
      info.paths.push_back(t.path);
      it = info.paths.end() - 1;
    }
    const int fi = static_cast<int>(it - info.paths.begin());
    s->file_of_.push_back(fi);
    const uint64_t fsize = s->files_[fi]->opened_size();
    const uint64_t vend = t.values_offset + static_cast<uint64_t>(t.rows) * t.value_row_bytes();
    const uint64_t send = t.scales_offset + static_cast<uint64_t>(t.rows) * t.scale_row_bytes();
    if (vend > fsize || send > fsize)
      return err("engram store: %s: table %s ends at byte %llu but the file has %llu bytes", t.path.c_str(),
                 t.name.c_str(), static_cast<unsigned long long>(std::max(vend, send)),
                 static_cast<unsigned long long>(fsize));
  }
  info.direct_io = true;
  for (const auto& f : s->files_) info.direct_io = info.direct_io && f->direct();
  info.slot_bytes = max_row;

  if (o.budget_bytes >= info.table_bytes) {  // everything fits: the RAM tier
    s->resident_ = true;
    info.tier = "ram";
    info.cache_bytes = info.table_bytes;
    STRATA_TRY(s->load_resident());
    return s;
  }
  info.tier = "ssd";
  const uint64_t per_slot = max_row + kSlotOverhead;
  const uint64_t n_slots = o.budget_bytes / per_slot;
  const uint64_t min_slots = static_cast<uint64_t>(std::max(1, o.min_slots));
  if (n_slots < min_slots)
    return err(
        "--engram-budget %s holds %llu Engram rows; the minimum is %llu rows (one token's rows of one Engram "
        "layer) "
        "x %llu bytes = %s",
        format_bytes(o.budget_bytes).c_str(), static_cast<unsigned long long>(n_slots),
        static_cast<unsigned long long>(min_slots), static_cast<unsigned long long>(per_slot),
        format_bytes(min_slots * per_slot).c_str());
  if (n_slots > (uint64_t{1} << 30))
    return err("--engram-budget %s: too many rows (> 2^30)", format_bytes(o.budget_bytes).c_str());
  s->n_slots_ = static_cast<int32_t>(n_slots);
  s->slot_stride_ = max_row;
  info.n_slots = s->n_slots_;
  info.cache_bytes = n_slots * per_slot;
  s->data_.reset(new (std::nothrow) uint8_t[n_slots * max_row]);
  if (!s->data_)
    return err("engram store: cannot allocate %s for the row cache", format_bytes(n_slots * max_row).c_str());
  const size_t n = static_cast<size_t>(n_slots);
  s->slot_key_.assign(n, 0);
  s->slot_state_.assign(n, slot_free);
  s->slot_ref_.assign(n, 0);
  s->slot_prefetched_.assign(n, 0);
  s->slot_io_.assign(n, io_none);
  s->slot_want_.assign(n, 0);
  s->slot_call_.assign(n, 0);
  size_t cap = 2;
  int bits = 1;
  while (cap < 2 * n) cap <<= 1, ++bits;
  s->index_.assign(cap, -1);
  s->shift_ = 64 - bits;
  s->free_.resize(n);
  for (size_t i = 0; i < n; ++i)
    s->free_[i] = static_cast<int32_t>(n - 1 - i);  // pop_back gives slot 0 first
  // Staging: a row's value and scale covers, one buffer per read in flight (twice the depth, so
  // the next reads are ready when one completes).
  const int n_stages = engram_staging_count(o.io_depth, o.io_threads);
  s->stage_bytes_ = engram_staging_bytes(max_vb, max_sb);
  s->staging_.reset(
      static_cast<uint8_t*>(std::aligned_alloc(kIoAlign, s->stage_bytes_ * static_cast<size_t>(n_stages))));
  if (!s->staging_) return err("engram store: cannot allocate the I/O staging buffers");
  s->stage_slot_.assign(static_cast<size_t>(n_stages), -1);
  for (int k = n_stages - 1; k >= 0; --k) s->stage_free_.push_back(k);
  s->pending_.reserve(1024);
  EngramStore* self = s.get();
  s->io_ = std::make_unique<IoQueue>(o.io_threads, [self](uint32_t k) { self->read_stage(k); });
  info.io_backend = "threads";
  return s;
}

EngramStore::~EngramStore() {
  io_.reset();  // queued reads are dropped, reads in flight finish (their completions find the store intact)
}

Status EngramStore::load_resident() {
  constexpr size_t kChunk = size_t{8} << 20;
  std::unique_ptr<uint8_t, void (*)(void*)> buf(
      static_cast<uint8_t*>(std::aligned_alloc(kIoAlign, kChunk + 2 * kIoAlign)), &std::free);
  if (!buf) return err("engram store: cannot allocate the load buffer");
  const double t0 = now_s();
  resident_values_.resize(tables_.size());
  resident_scales_.resize(tables_.size());
  for (size_t ti = 0; ti < tables_.size(); ++ti) {
    const EngramTable& t = tables_[ti];
    IoFile& f = *files_[static_cast<size_t>(file_of_[ti])];
    auto load = [&](uint64_t off, uint64_t len, std::vector<uint8_t>* out) -> Status {
      out->resize(static_cast<size_t>(len));
      for (uint64_t done = 0; done < len;) {
        const size_t part = static_cast<size_t>(std::min<uint64_t>(kChunk, len - done));
        STRATA_TRY(io_read_covering(f, buf.get(), off + done, part));
        std::memcpy(out->data() + done, buf.get() + ((off + done) - io_align_down(off + done)), part);
        stats_.totals.bytes_read += cover_bytes(off + done, part, f.opened_size());
        ++stats_.totals.reads;
        done += part;
      }
      return {};
    };
    STRATA_TRY(
        load(t.values_offset, static_cast<uint64_t>(t.rows) * t.value_row_bytes(), &resident_values_[ti]));
    STRATA_TRY(
        load(t.scales_offset, static_cast<uint64_t>(t.rows) * t.scale_row_bytes(), &resident_scales_[ti]));
    stats_.totals.row_bytes += t.bytes();
  }
  stats_.totals.read_s += now_s() - t0;
  return {};
}

EngramStepStats& EngramStore::step_locked() {
  if (stats_.steps.empty()) stats_.steps.emplace_back();
  return stats_.steps.back();
}

void EngramStore::begin_step(int64_t n_tokens) {
  std::lock_guard<std::mutex> lk(mu_);
  EngramStepStats st;
  st.token0 = stats_.totals.tokens;
  st.n_tokens = n_tokens;
  stats_.steps.push_back(st);
  stats_.totals.tokens += n_tokens;
  ++stats_.totals.steps;
  ++step_epoch_;
}

void EngramStore::end_step() {}

int32_t EngramStore::find_locked(uint64_t key) const {
  const size_t mask = index_.size() - 1;
  for (size_t i = home(key);; i = (i + 1) & mask) {
    const int32_t s = index_[i];
    if (s < 0) return -1;
    if (slot_key_[static_cast<size_t>(s)] == key) return s;
  }
}

void EngramStore::index_insert_locked(uint64_t key, int32_t slot) {
  const size_t mask = index_.size() - 1;
  size_t i = home(key);
  while (index_[i] >= 0) i = (i + 1) & mask;
  index_[i] = slot;
}

void EngramStore::index_erase_locked(uint64_t key) {
  const size_t mask = index_.size() - 1;
  size_t i = home(key);
  while (slot_key_[static_cast<size_t>(index_[i])] != key) i = (i + 1) & mask;  // PRECOND: present
  index_[i] = -1;
  // Backward-shift deletion: move later members of the probe run into the hole when their home
  // position does not lie cyclically in (hole, their position].
  for (size_t j = (i + 1) & mask; index_[j] >= 0; j = (j + 1) & mask) {
    const size_t k = home(slot_key_[static_cast<size_t>(index_[j])]);
    const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    index_[i] = index_[j];
    index_[j] = -1;
    i = j;
  }
}

int32_t EngramStore::take_slot_locked(bool for_prefetch) {
  if (!free_.empty()) {
    const int32_t s = free_.back();
    free_.pop_back();
    return s;
  }
  // CLOCK: two sweeps (the first clears reference bits).
  for (int64_t step = 0; step < 2 * static_cast<int64_t>(n_slots_); ++step) {
    const int32_t s = hand_;
    hand_ = hand_ + 1 == n_slots_ ? 0 : hand_ + 1;
    const size_t i = static_cast<size_t>(s);
    if (slot_state_[i] == slot_filling || slot_call_[i] == call_epoch_) continue;
    if (for_prefetch && slot_want_[i] == step_epoch_) continue;
    if (slot_ref_[i]) {
      slot_ref_[i] = 0;
      continue;
    }
    if (slot_state_[i] == slot_failed) errors_.erase(s);
    if (slot_prefetched_[i]) ++stats_.totals.prefetch_wasted;
    index_erase_locked(slot_key_[i]);
    slot_state_[i] = slot_free;
    ++stats_.totals.evictions;
    return s;
  }
  return -1;
}

void EngramStore::start_read_locked(int32_t s, uint64_t key, bool urgent, bool prefetch) {
  const size_t i = static_cast<size_t>(s);
  slot_key_[i] = key;
  slot_state_[i] = slot_filling;
  slot_ref_[i] = 0;
  slot_prefetched_[i] = prefetch ? 1 : 0;
  slot_want_[i] = step_epoch_;
  slot_io_[i] = io_queued;
  index_insert_locked(key, s);
  ++inflight_;
  (urgent ? wait_urgent_ : wait_normal_).push_back(s);
}

void EngramStore::dispatch_locked() {
  while (!stage_free_.empty() && (!wait_urgent_.empty() || !wait_normal_.empty())) {
    const bool urgent = !wait_urgent_.empty();
    std::deque<int32_t>& q = urgent ? wait_urgent_ : wait_normal_;
    const int32_t s = q.front();
    q.pop_front();
    if (slot_io_[static_cast<size_t>(s)] != io_queued) continue;  // promoted earlier: a stale entry
    slot_io_[static_cast<size_t>(s)] = io_submitted;
    const int32_t k = stage_free_.back();
    stage_free_.pop_back();
    stage_slot_[static_cast<size_t>(k)] = s;
    io_->submit(static_cast<uint32_t>(k), urgent);
  }
}

void EngramStore::read_stage(uint32_t k) {
  uint64_t key;
  {
    std::lock_guard<std::mutex> lk(mu_);
    key = slot_key_[static_cast<size_t>(stage_slot_[k])];
  }
  const size_t ti = static_cast<size_t>(key >> 48);
  const int64_t row = static_cast<int64_t>(key & ((uint64_t{1} << 48) - 1));
  const EngramTable& t = tables_[ti];
  IoFile& f = *files_[static_cast<size_t>(file_of_[ti])];
  uint8_t* stage = staging_.get() + static_cast<size_t>(k) * stage_bytes_;
  const double t0 = now_s();
  Status st = io_read_covering(f, stage, t.value_offset(row), t.value_row_bytes());
  if (st.ok())
    st = io_read_covering(f, stage + io_align_up(t.value_row_bytes()) + kIoAlign, t.scale_offset(row),
                          t.scale_row_bytes());
  on_done(k, st, now_s() - t0);
}

void EngramStore::make_urgent_locked(int32_t s) {
  const size_t i = static_cast<size_t>(s);
  if (slot_io_[i] == io_queued) {
    wait_urgent_.push_front(s);  // the entry left in wait_normal_ is skipped as stale
    // (slot_io_ stays io_queued; dispatch takes the urgent entry first)
    return;
  }
  if (slot_io_[i] != io_submitted) return;
  for (size_t k = 0; k < stage_slot_.size(); ++k)
    if (stage_slot_[k] == s) {
      io_->promote(static_cast<uint32_t>(k));
      return;
    }
}

void EngramStore::on_done(uint32_t stage, const Status& st, double seconds) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    const int32_t s = stage_slot_[stage];
    const size_t i = static_cast<size_t>(s);
    const uint64_t key = slot_key_[i];
    const size_t ti = static_cast<size_t>(key >> 48);
    const int64_t row = static_cast<int64_t>(key & ((uint64_t{1} << 48) - 1));
    const EngramTable& t = tables_[ti];
    const uint64_t voff = t.value_offset(row), soff = t.scale_offset(row);
    const uint32_t vb = t.value_row_bytes(), sb = t.scale_row_bytes();
    --inflight_;
    slot_io_[i] = io_none;
    stats_.totals.read_s += seconds;
    if (st.ok()) {
      const uint8_t* stg = staging_.get() + static_cast<size_t>(stage) * stage_bytes_;
      uint8_t* dst = slot_data(s);
      std::memcpy(dst, stg + (voff - io_align_down(voff)), vb);
      std::memcpy(dst + vb, stg + io_align_up(vb) + kIoAlign + (soff - io_align_down(soff)), sb);
      slot_state_[i] = slot_ready;
      const uint64_t fs = files_[static_cast<size_t>(file_of_[ti])]->opened_size();
      const uint64_t bytes = cover_bytes(voff, vb, fs) + cover_bytes(soff, sb, fs);
      ++stats_.totals.reads;
      stats_.totals.bytes_read += bytes;
      stats_.totals.row_bytes += vb + sb;
      step_locked().bytes_read += bytes;
    } else {
      slot_state_[i] = slot_failed;
      errors_[s] = st.message();
      ++stats_.totals.read_errors;
    }
    stage_slot_[stage] = -1;
    stage_free_.push_back(static_cast<int32_t>(stage));
    dispatch_locked();
  }
  cv_.notify_all();
}

void EngramStore::prefetch(int table, const int64_t* ids, int64_t n) {
  if (resident_ || !opts_.prefetch || table < 0 || table >= static_cast<int>(tables_.size())) return;
  const int64_t rows = tables_[static_cast<size_t>(table)].rows;
  std::lock_guard<std::mutex> lk(mu_);
  stats_.totals.prefetch_requested += static_cast<uint64_t>(n);
  for (int64_t j = 0; j < n; ++j) {
    if (ids[j] < 0 || ids[j] >= rows) continue;
    const uint64_t key = key_of(table, ids[j]);
    const int32_t s = find_locked(key);
    if (s >= 0) {
      slot_want_[static_cast<size_t>(s)] = step_epoch_;
      continue;
    }
    const int32_t fresh = take_slot_locked(/*for_prefetch=*/true);
    if (fresh < 0) {
      ++stats_.totals.prefetch_dropped;
      continue;
    }
    start_read_locked(fresh, key, /*urgent=*/false, /*prefetch=*/true);
    ++stats_.totals.prefetch_issued;
  }
  dispatch_locked();
}

Status EngramStore::rows_resident(int table, const int64_t* ids, int64_t n, float* out) {
  const EngramTable& t = tables_[static_cast<size_t>(table)];
  const auto& vals = resident_values_[static_cast<size_t>(table)];
  const auto& scs = resident_scales_[static_cast<size_t>(table)];
  for (int64_t j = 0; j < n; ++j)
    engram_row_dequant(t, vals.data() + static_cast<size_t>(ids[j]) * t.value_row_bytes(),
                       scs.data() + static_cast<size_t>(ids[j]) * t.scale_row_bytes(), out + j * t.head_dim);
  std::lock_guard<std::mutex> lk(mu_);
  EngramStepStats& st = step_locked();
  st.lookups += static_cast<uint64_t>(n);
  st.hits += static_cast<uint64_t>(n);
  stats_.totals.lookups += static_cast<uint64_t>(n);
  stats_.totals.hits += static_cast<uint64_t>(n);
  return {};
}

Status EngramStore::rows(int table, const int64_t* ids, int64_t n, float* out) {
  if (table < 0 || table >= static_cast<int>(tables_.size()))
    return err("engram store: table %d requested, the store has %zu", table, tables_.size());
  const EngramTable& t = tables_[static_cast<size_t>(table)];
  for (int64_t j = 0; j < n; ++j)
    if (ids[j] < 0 || ids[j] >= t.rows)
      return err("engram store: %s: row %lld requested, the table has %lld rows", t.name.c_str(),
                 static_cast<long long>(ids[j]), static_cast<long long>(t.rows));
  if (resident_) return rows_resident(table, ids, n, out);

  std::unique_lock<std::mutex> lk(mu_);
  int64_t j0 = 0;
  while (j0 < n) {
    // Pass 1: classify the chunk's rows and start the reads of the missing ones (all urgent, in
    // parallel); a chunk ends when no slot can be taken without evicting one of its own rows.
    ++call_epoch_;
    pending_.clear();
    int64_t j1 = j0;
    uint64_t hits = 0, late = 0, misses = 0;
    for (; j1 < n; ++j1) {
      const uint64_t key = key_of(table, ids[j1]);
      int32_t s = find_locked(key);
      if (s >= 0) {
        const size_t i = static_cast<size_t>(s);
        if (slot_call_[i] == call_epoch_) {
          ++hits;  // a repeat within this call: fetched once
        } else if (slot_state_[i] == slot_filling) {
          ++late;
          make_urgent_locked(s);
        } else {
          ++hits;
        }
        if (slot_prefetched_[i]) {
          slot_prefetched_[i] = 0;
          ++stats_.totals.prefetch_used;
        }
      } else {
        s = take_slot_locked(/*for_prefetch=*/false);
        if (s < 0) {
          if (j1 == j0) {  // nothing of ours pinned: only reads in flight hold the slots; wait for one
            dispatch_locked();
            cv_.wait(lk, [&] { return inflight_ < n_slots_; });
            --j1;  // retry this row
            continue;
          }
          break;
        }
        start_read_locked(s, key, /*urgent=*/true, /*prefetch=*/false);
        ++misses;
      }
      slot_call_[static_cast<size_t>(s)] = call_epoch_;
      slot_want_[static_cast<size_t>(s)] = step_epoch_;
      slot_ref_[static_cast<size_t>(s)] = 1;
      pending_.push_back(s);
    }
    dispatch_locked();
    EngramStepStats& st = step_locked();
    const uint64_t m = static_cast<uint64_t>(j1 - j0);
    st.lookups += m;
    st.hits += hits;
    st.late += late;
    st.misses += misses;
    stats_.totals.lookups += m;
    stats_.totals.hits += hits;
    stats_.totals.late += late;
    stats_.totals.misses += misses;
    // Pass 2: wait for the chunk's reads, then dequantise (slots of this call are never evicted:
    // only this thread evicts, and it skips them).
    const double t0 = now_s();
    bool waited = false;
    for (int32_t s : pending_) {
      if (slot_state_[static_cast<size_t>(s)] == slot_filling) {
        waited = true;
        cv_.wait(lk, [&] { return slot_state_[static_cast<size_t>(s)] != slot_filling; });
      }
    }
    if (waited) {
      const double dt = now_s() - t0;
      step_locked().stall_s += dt;
      stats_.totals.stall_s += dt;
    }
    for (size_t k = 0; k < pending_.size(); ++k) {
      const int32_t s = pending_[k];
      const size_t i = static_cast<size_t>(s);
      if (slot_state_[i] == slot_failed) {
        const std::string msg = errors_[s];
        errors_.erase(s);
        index_erase_locked(slot_key_[i]);
        slot_state_[i] = slot_free;
        slot_call_[i] = 0;
        free_.push_back(s);
        return err("engram store: %s row %lld: %s", t.name.c_str(),
                   static_cast<long long>(ids[j0 + static_cast<int64_t>(k)]), msg.c_str());
      }
      const uint8_t* d = slot_data(s);
      engram_row_dequant(t, d, d + t.value_row_bytes(), out + (j0 + static_cast<int64_t>(k)) * t.head_dim);
    }
    j0 = j1;
  }
  ++call_epoch_;  // releases the last chunk's rows for eviction
  return {};
}

void EngramStore::wait_idle() {
  if (resident_) return;
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return inflight_ == 0; });
}

EngramStats EngramStore::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

bool EngramStore::is_cached(int table, int64_t row) const {
  if (resident_)
    return table >= 0 && table < static_cast<int>(tables_.size()) && row >= 0 && row < tables_[table].rows;
  std::lock_guard<std::mutex> lk(mu_);
  const int32_t s = find_locked(key_of(table, row));
  return s >= 0 && slot_state_[static_cast<size_t>(s)] == slot_ready;
}

int64_t EngramStore::cached_rows() const {
  if (resident_) {
    int64_t n = 0;
    for (const auto& t : tables_) n += t.rows;
    return n;
  }
  std::lock_guard<std::mutex> lk(mu_);
  int64_t n = 0;
  for (uint8_t st : slot_state_) n += st == slot_ready;
  return n;
}

}  // namespace strata
