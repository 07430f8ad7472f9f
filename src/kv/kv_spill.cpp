#include "kv/kv_spill.h"

#include <cstdio>

namespace strata {

Result<std::unique_ptr<KvSpill>> KvSpill::create(const KvSpillOptions& o, const KvBlockFormat& f) {
  std::unique_ptr<KvSpill> s(new KvSpill());
  if (o.ram_bytes > 0) s->ram_ = std::make_unique<KvRamTier>(o.ram_bytes);
  if (!o.dir.empty()) {
    STRATA_ASSIGN(s->disk_, KvDiskTier::open(o.dir, f));
  }
  s->s_.ram_on = s->ram_ != nullptr;
  s->s_.disk_on = s->disk_ != nullptr;
  s->s_.ram_budget = o.ram_bytes;
  s->s_.ram_bw = 4e9;
  s->s_.disk_bw = 0.5e9;
  return s;
}

KvTier KvSpill::where(uint64_t hash) const {
  if (ram_ && ram_->contains(hash)) return KvTier::ram;
  if (disk_ && disk_->contains(hash)) return KvTier::disk;
  return KvTier::none;
}

void KvSpill::to_disk(const KvBlockRecord& r) {
  if (!disk_) {
    ++s_.dropped_blocks;
    return;
  }
  if (disk_->contains(r.hash)) return;
  if (Status st = disk_->write(r); !st.ok()) {
    std::fprintf(stderr, "strata: KV cache: %s (the block is dropped)\n", st.message().c_str());
    ++s_.dropped_blocks;
    return;
  }
  s_.spilled_disk_bytes += r.bytes.size();
}

void KvSpill::spill(KvBlockRecord r) {
  if (!ram_) {
    to_disk(r);
    return;
  }
  s_.spilled_ram_bytes += r.bytes.size();
  for (const KvBlockRecord& out : ram_->put(std::move(r))) to_disk(out);
}

std::optional<KvBlockRecord> KvSpill::fetch(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  if (ram_)
    if (auto r = ram_->take(hash, parent, tokens)) {
      ++s_.ram_hits;
      return r;
    }
  if (!disk_ || !disk_->contains(hash)) return std::nullopt;
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
  return s_.prefill_s_per_token <= 0 || s_.last_load_s <= s_.last_recompute_s;
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

Status KvSpill::persist(const KvBlockRecord& r) {
  if (!disk_ || disk_->contains(r.hash)) return {};
  STRATA_TRY(disk_->write(r));
  s_.spilled_disk_bytes += r.bytes.size();
  return {};
}

Status KvSpill::persist_ram() {
  if (!ram_) return {};
  for (const KvBlockRecord& r : ram_->entries()) STRATA_TRY(persist(r));
  return {};
}

KvSpillStats KvSpill::stats() const {
  KvSpillStats s = s_;
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
