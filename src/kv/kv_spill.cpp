#include "kv/kv_spill.h"

#include <algorithm>
#include <cstdio>

#include "base/clock.h"

namespace strata {

Result<std::unique_ptr<KvSpill>> KvSpill::create(const KvSpillOptions& o, const KvBlockFormat& f) {
  std::unique_ptr<KvSpill> s(new KvSpill());
  if (o.ram_bytes > 0) s->ram_ = std::make_unique<KvRamTier>(o.ram_bytes);
  if (!o.dir.empty()) {
    STRATA_ASSIGN(s->disk_, KvDiskTier::open(o.dir, f, o.disk_budget));
    s->before_write_ = o.before_write;
    s->capacity_ = static_cast<size_t>(queue_capacity(f));
    s->thread_ = std::thread([p = s.get()] { p->writer(); });
  }
  s->verbose_ = o.verbose;
  s->s_.ram_on = s->ram_ != nullptr;
  s->s_.disk_on = s->disk_ != nullptr;
  s->s_.ram_budget = o.ram_bytes;
  s->s_.disk_budget = o.disk_budget;
  s->s_.ram_bw = 4e9;
  s->s_.disk_bw = 0.5e9;
  return s;
}

int KvSpill::queue_capacity(const KvBlockFormat& f) {
  const uint64_t record = std::max<uint64_t>(f.payload_bytes + static_cast<uint64_t>(f.block_size) * 4, 1);
  return static_cast<int>(std::clamp<uint64_t>(kSpillQueueBytes / record, 4, 1024));
}

uint64_t KvSpill::queue_bytes(const KvBlockFormat& f) {
  return static_cast<uint64_t>(queue_capacity(f)) *
         (f.payload_bytes + static_cast<uint64_t>(f.block_size) * sizeof(int32_t));
}

KvSpill::~KvSpill() {
  {
    std::lock_guard<std::mutex> lk(qmu_);
    stop_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();  // the writer drains the queue first
}

KvTier KvSpill::where(uint64_t hash) const {
  if (ram_ && ram_->contains(hash)) return KvTier::ram;
  if (!disk_) return KvTier::none;
  std::lock_guard<std::mutex> lk(qmu_);
  return pending_.count(hash) != 0 || disk_->contains(hash) ? KvTier::disk : KvTier::none;
}

void KvSpill::writer() {
  std::unique_lock<std::mutex> lk(qmu_);
  for (;;) {
    work_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, everything written
    const uint64_t h = queue_.front();
    queue_.pop_front();
    const KvBlockRecord& r = pending_.at(h);  // nobody else changes or erases it
    lk.unlock();
    if (before_write_) before_write_(h);
    Status st = disk_->write_file(r);
    lk.lock();
    if (st.ok()) {
      s_.disk_evicted += disk_->add(h);
      s_.spilled_disk_bytes += r.bytes.size();
    } else {
      std::fprintf(stderr, "strata: KV cache: %s (the block is dropped)\n", st.message().c_str());
      ++s_.dropped_blocks;
      ++s_.write_errors;
      if (failed_++ == 0) first_error_ = st.message();
    }
    pending_.erase(h);
    room_.notify_all();
    if (pending_.empty()) idle_.notify_all();
  }
}

void KvSpill::to_disk(KvBlockRecord r, bool count_drop) {
  if (!disk_) {
    if (count_drop) ++s_.dropped_blocks;
    return;
  }
  std::unique_lock<std::mutex> lk(qmu_);
  if (disk_->contains(r.hash) || pending_.count(r.hash) != 0) return;
  if (!disk_->fits_one()) {  // a budget below one block file
    ++s_.dropped_blocks;
    return;
  }
  if (pending_.size() >= capacity_) {
    const double t0 = now_seconds();
    ++s_.queue_waits;
    room_.wait(lk, [&] { return pending_.size() < capacity_; });
    s_.queue_wait_s += now_seconds() - t0;
  }
  const uint64_t h = r.hash;
  pending_.emplace(h, std::move(r));
  queue_.push_back(h);
  work_.notify_one();
}

void KvSpill::spill(KvBlockRecord r) {
  if (!ram_) {
    to_disk(std::move(r));
    return;
  }
  s_.spilled_ram_bytes += r.bytes.size();
  for (KvBlockRecord& out : ram_->put(std::move(r))) to_disk(std::move(out));
}

void KvSpill::observe_spill(int64_t blocks, double seconds) {
  s_.spill_blocks += static_cast<uint64_t>(std::max<int64_t>(blocks, 0));
  s_.spill_s += seconds;
}

std::optional<KvBlockRecord> KvSpill::fetch(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  if (ram_)
    if (auto r = ram_->take(hash, parent, tokens)) {
      ++s_.ram_hits;
      return r;
    }
  if (!disk_) return std::nullopt;
  std::lock_guard<std::mutex> lk(qmu_);
  if (const auto it = pending_.find(hash); it != pending_.end()) {  // written soon: its copy
    if (!it->second.names(hash, parent, tokens)) return std::nullopt;
    ++s_.disk_hits;
    ++s_.queue_hits;
    return it->second;
  }
  if (!disk_->contains(hash)) return std::nullopt;
  auto r = disk_->read(hash);
  if (!r.ok()) {  // logged by the tier, naming the file
    ++s_.load_errors;
    return std::nullopt;
  }
  if (!r->names(hash, parent, tokens)) return std::nullopt;  // a hash collision: not this content
  ++s_.disk_hits;
  return std::move(*r);
}

bool KvSpill::load_cheaper(int64_t ram_blocks, int64_t disk_blocks, int64_t tokens, uint64_t block_bytes) {
  const double b = static_cast<double>(block_bytes);
  s_.last_load_s =
      static_cast<double>(ram_blocks) * b / s_.ram_bw + static_cast<double>(disk_blocks) * b / s_.disk_bw;
  s_.last_recompute_s = static_cast<double>(tokens) * s_.prefill_s_per_token;
  s_.last_measured_s = 0;
  last_ram_ = ram_blocks;
  last_disk_ = disk_blocks;
  const bool load = s_.prefill_s_per_token <= 0 || s_.last_load_s <= s_.last_recompute_s;
  ++(load ? s_.load_decisions : s_.recompute_decisions);
  if (load) s_.predicted_load_s += s_.last_load_s;
  if (verbose_ && !load)
    std::fprintf(stderr,
                 "strata: KV cache: prefix run of %lld blocks (%lld RAM, %lld SSD): load %.3f ms predicted, "
                 "recompute %.3f ms predicted: recompute\n",
                 static_cast<long long>(ram_blocks + disk_blocks), static_cast<long long>(ram_blocks),
                 static_cast<long long>(disk_blocks), s_.last_load_s * 1e3, s_.last_recompute_s * 1e3);
  return load;
}

void KvSpill::set_last_measured(double seconds, int64_t blocks) {
  s_.last_measured_s = seconds;
  s_.measured_load_s += seconds;
  const bool known = s_.prefill_s_per_token > 0;  // else the recompute side was not predicted
  // Against the recompute predicted for the blocks it loaded (a fetch can stop short of the run).
  const int64_t run = last_ram_ + last_disk_;
  const double recompute_loaded =
      run > 0 ? s_.last_recompute_s * static_cast<double>(blocks) / static_cast<double>(run) : 0;
  if (known && blocks > 0 && seconds <= recompute_loaded) ++s_.loads_beat_recompute;
  char recompute[48] = "not measured yet";
  if (known) std::snprintf(recompute, sizeof recompute, "%.3f ms", s_.last_recompute_s * 1e3);
  if (verbose_)
    std::fprintf(stderr,
                 "strata: KV cache: prefix run of %lld blocks (%lld RAM, %lld SSD): load %.3f ms predicted, "
                 "recompute %s predicted: load; %lld blocks loaded in %.3f ms\n",
                 static_cast<long long>(last_ram_ + last_disk_), static_cast<long long>(last_ram_),
                 static_cast<long long>(last_disk_), s_.last_load_s * 1e3, recompute,
                 static_cast<long long>(blocks), seconds * 1e3);
}

void KvSpill::observe_load(KvTier tier, uint64_t bytes, double seconds) {
  if (tier != KvTier::ram && tier != KvTier::disk) return;
  if (bytes == 0 || !(seconds > 0)) return;
  const int i = tier == KvTier::ram ? 0 : 1;
  double& bw = i == 0 ? s_.ram_bw : s_.disk_bw;
  const double sample = static_cast<double>(bytes) / seconds;
  bw = bw_measured_[i] ? 0.8 * bw + 0.2 * sample : sample;  // the first measurement replaces the prior
  bw_measured_[i] = true;
}

void KvSpill::observe_prefill(int64_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds > 0)) return;
  const double sample = seconds / static_cast<double>(tokens);
  double& t = s_.prefill_s_per_token;
  t = t > 0 ? 0.8 * t + 0.2 * sample : sample;
}

void KvSpill::persist(KvBlockRecord r) {
  to_disk(std::move(r), false);
}

void KvSpill::persist_ram() {
  if (!ram_) return;
  for (const KvBlockRecord& r : ram_->entries()) persist(r);
}

Status KvSpill::flush() {
  std::unique_lock<std::mutex> lk(qmu_);
  idle_.wait(lk, [&] { return pending_.empty(); });
  const uint64_t n = failed_;
  failed_ = 0;
  if (n == 0) return {};
  return err("%llu KV block files could not be written; the first: %s", static_cast<unsigned long long>(n),
             first_error_.c_str());
}

KvSpillStats KvSpill::stats() const {
  std::lock_guard<std::mutex> lk(qmu_);
  KvSpillStats s = s_;
  s.queue_blocks = static_cast<int64_t>(pending_.size());
  if (ram_) {
    s.ram_blocks = ram_->blocks();
    s.ram_bytes = ram_->bytes();
  }
  if (disk_) {
    s.disk_blocks = disk_->blocks();
    s.disk_bytes = disk_->bytes();
    s.disk_ignored = disk_->ignored();
    s.disk_rejected = disk_->rejected();
  }
  return s;
}

}  // namespace strata
