// KvPool's side of the spill tiers (kv/kv_spill.h): copying a block's rows out of the pool when
// it is evicted, back in on a prefix hit in RAM or on SSD, and persisting the cache.
#include <algorithm>
#include <cstdio>

#include "base/clock.h"
#include "kv/kv_pool.h"

namespace strata {

Status KvPool::read_block(int32_t b, std::vector<uint8_t>* out) const {
  out->resize(block_bytes_);
  size_t at = 0;
  DeviceTicket last = 0;
  for (const Region& g : regions_) {
    const size_t n = g.row_bytes * static_cast<size_t>(block_size_);
    STRATA_ASSIGN(last, dev_.download(out->data() + at, buf_, g.offset + static_cast<size_t>(b) * n, n));
    at += n;
  }
  return dev_.wait(last);
}

Status KvPool::write_block(int32_t b, const std::vector<uint8_t>& bytes) const {
  STRATA_ASSERT(bytes.size() == block_bytes_);
  size_t at = 0;
  DeviceTicket last = 0;
  for (const Region& g : regions_) {
    const size_t n = g.row_bytes * static_cast<size_t>(block_size_);
    STRATA_ASSIGN(last, dev_.upload(buf_, g.offset + static_cast<size_t>(b) * n, bytes.data() + at, n));
    at += n;
  }
  return dev_.wait(last);
}

void KvPool::spill_evicted(std::vector<EvictedBlock>& ev) {
  if (ev.empty()) return;
  const double t0 = now_seconds();
  for (EvictedBlock& e : ev) {
    KvBlockRecord r{e.hash, e.parent, std::move(e.tokens), {}};
    if (Status st = read_block(e.block, &r.bytes); !st.ok()) {
      std::fprintf(stderr, "strata: KV cache: copying block %d out: %s (dropped)\n", e.block,
                   st.message().c_str());
      continue;
    }
    spill_->spill(std::move(r));
  }
  spill_->observe_spill(static_cast<int64_t>(ev.size()), now_seconds() - t0);
}

void KvPool::load_prefix(BlockTable& t, std::span<const int32_t> tokens) {
  const size_t bs = static_cast<size_t>(block_size_);
  auto fits = [&](int32_t k) { return static_cast<size_t>(k + 1) * bs <= tokens.size() - 1 && k < t.max_; };
  // The run the tiers hold after the pool's last hit (hashes only: a collision shows at the fetch).
  int64_t in_ram = 0, on_disk = 0;
  uint64_t parent = t.n_ > 0 ? t.hashes_[static_cast<size_t>(t.n_ - 1)] : 0;
  for (int32_t k = t.n_; fits(k); ++k) {
    const uint64_t h = block_hash(parent, tokens.subspan(static_cast<size_t>(k) * bs, bs), salt_ ^ t.salt());
    const KvTier w = spill_->where(h);
    if (w == KvTier::none) break;
    (w == KvTier::ram ? in_ram : on_disk) += 1;
    parent = h;
  }
  // Only what the pool can take now is decided on (a parked sequence looks again when it has room).
  const int64_t room = pool_.available();
  if (in_ram + on_disk > room) {
    on_disk = std::max<int64_t>(0, std::min(on_disk, room - in_ram));
    in_ram = std::min(in_ram, room);
  }
  const int64_t run = in_ram + on_disk;
  if (run == 0) return;
  if (!spill_->load_cheaper(in_ram, on_disk, run * block_size_, block_bytes_)) {
    spill_->count_recomputed(run);
    return;
  }
  const double t0 = now_seconds();
  const KvSpillStats before = spill_->stats();
  parent = t.n_ > 0 ? t.hashes_[static_cast<size_t>(t.n_ - 1)] : 0;
  for (int64_t i = 0; i < run && fits(t.n_) && pool_.available() > 0; ++i) {
    const auto blk = tokens.subspan(static_cast<size_t>(t.n_) * bs, bs);
    const uint64_t h = block_hash(parent, blk, salt_ ^ t.salt());
    auto rec = spill_->fetch(h, parent, blk);
    if (!rec) break;
    std::vector<EvictedBlock> ev;
    auto got = pool_.allocate(1, &ev);
    if (!got.ok()) break;
    spill_evicted(ev);
    const int32_t b = got->front();
    if (Status st = write_block(b, rec->bytes); !st.ok()) {
      std::fprintf(stderr, "strata: KV cache: copying block %d in: %s (recomputed)\n", b,
                   st.message().c_str());
      pool_.release(b);
      break;
    }
    pool_.commit(b, h, parent, blk);
    t.hashes_[static_cast<size_t>(t.n_)] = h;
    t.push(b);
    t.n_hashed_ = t.n_;
    parent = h;
  }
  const double dt = now_seconds() - t0;
  const KvSpillStats after = spill_->stats();
  const uint64_t from_ram = after.ram_hits - before.ram_hits, from_disk = after.disk_hits - before.disk_hits;
  // The run's time goes to the slower tier it touched (a mixed run is rare: RAM pushes out to SSD
  // oldest first, so a prefix's run is RAM then SSD).
  if (from_disk > 0)
    spill_->observe_load(KvTier::disk, (from_ram + from_disk) * block_bytes_, dt);
  else if (from_ram > 0)
    spill_->observe_load(KvTier::ram, from_ram * block_bytes_, dt);
  spill_->set_last_measured(dt, static_cast<int64_t>(from_ram + from_disk));
}

void KvPool::observe_prefill(int64_t tokens, double seconds) {
  std::lock_guard<std::mutex> lk(mu_);
  if (spill_) spill_->observe_prefill(tokens, seconds);
}

Status KvPool::persist() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!spill_ || !spill_->has_disk()) return {};
  spill_->persist_ram();
  Status copy;
  for (int32_t b = 0; b < n_blocks_ && copy.ok(); ++b) {
    if (!pool_.cached(b)) continue;
    const auto toks = pool_.tokens(b);
    KvBlockRecord r{pool_.hash(b), pool_.parent(b), std::vector<int32_t>(toks.begin(), toks.end()), {}};
    copy = read_block(b, &r.bytes);
    if (copy.ok()) spill_->persist(std::move(r));
  }
  Status written = spill_->flush();  // the queue's writes, whatever the copies did
  return copy.ok() ? written : copy;
}

Status KvPool::flush_spill() const {
  std::lock_guard<std::mutex> lk(mu_);
  return spill_ ? spill_->flush() : Status{};
}

}  // namespace strata
