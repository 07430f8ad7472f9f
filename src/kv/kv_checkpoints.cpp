#include "kv/kv_checkpoints.h"

#include <utility>

namespace strata {

void KvCheckpoints::put(uint64_t hash, KvCheckpoint c) {
  if (capacity_ <= 0) return;
  auto it = map_.find(hash);
  if (it != map_.end()) {
    bytes_ -= it->second.c.bytes.size();
    lru_.erase(it->second.at);
    map_.erase(it);
  }
  lru_.push_front(hash);
  bytes_ += c.bytes.size();
  map_.emplace(hash, Entry{std::move(c), lru_.begin()});
  ++saved_;
  while (static_cast<int64_t>(map_.size()) > capacity_) {
    const uint64_t old = lru_.back();
    lru_.pop_back();
    auto o = map_.find(old);
    bytes_ -= o->second.c.bytes.size();
    map_.erase(o);
    ++dropped_;
  }
}

const KvCheckpoint* KvCheckpoints::find(uint64_t hash) {
  auto it = map_.find(hash);
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.at);
  return &it->second.c;
}

KvCheckpointStats KvCheckpoints::stats() const {
  return KvCheckpointStats{static_cast<int64_t>(map_.size()), capacity_, bytes_, saved_, restored_, dropped_};
}

}  // namespace strata
