#include "kv/kv_ram_tier.h"

#include <algorithm>

namespace strata {

bool KvBlockRecord::names(uint64_t h, uint64_t p, std::span<const int32_t> t) const {
  return hash == h && parent == p && std::equal(tokens.begin(), tokens.end(), t.begin(), t.end());
}

std::vector<KvBlockRecord> KvRamTier::put(KvBlockRecord r) {
  std::vector<KvBlockRecord> out;
  if (const auto it = map_.find(r.hash); it != map_.end()) {
    bytes_ -= it->second->footprint();
    lru_.erase(it->second);
    map_.erase(it);
  }
  if (r.footprint() > budget_) {
    out.push_back(std::move(r));
    return out;
  }
  while (!lru_.empty() && bytes_ + r.footprint() > budget_) {
    bytes_ -= lru_.front().footprint();
    map_.erase(lru_.front().hash);
    out.push_back(std::move(lru_.front()));
    lru_.pop_front();
  }
  bytes_ += r.footprint();
  const uint64_t h = r.hash;
  lru_.push_back(std::move(r));
  map_.emplace(h, std::prev(lru_.end()));
  return out;
}

std::optional<KvBlockRecord> KvRamTier::take(uint64_t hash, uint64_t parent,
                                             std::span<const int32_t> tokens) {
  const auto it = map_.find(hash);
  if (it == map_.end() || !it->second->names(hash, parent, tokens)) return std::nullopt;
  KvBlockRecord r = std::move(*it->second);
  bytes_ -= r.footprint();
  lru_.erase(it->second);
  map_.erase(it);
  return r;
}

}  // namespace strata
