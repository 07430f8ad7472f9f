// KvRamTier: the host RAM tier of the KV cache (--cache-ram): whole cached blocks that the pool
// (kv/kv_pool.h) evicted, under their chain hash, as one byte string each (every paged part's
// rows of the block, in the pool's region order), least recently used first out when the byte
// budget is passed. Entries leave on a hit (they go back to the pool: the tiers are exclusive) or
// when the budget pushes them out (to the SSD tier, kv/kv_disk_tier.h, when there is one).
// Not thread-safe (kv/KvPool serializes).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace strata {

// One cached block outside the pool: its name (chain hash, parent hash, tokens) and its rows.
struct KvBlockRecord {
  uint64_t hash = 0, parent = 0;
  std::vector<int32_t> tokens;
  std::vector<uint8_t> bytes;
  uint64_t footprint() const { return bytes.size() + tokens.size() * sizeof(int32_t); }
  bool names(uint64_t h, uint64_t p, std::span<const int32_t> t) const;  // same hash, parent, tokens
};

class KvRamTier {
 public:
  explicit KvRamTier(uint64_t budget_bytes) : budget_(budget_bytes) {}
  uint64_t budget() const { return budget_; }
  int64_t blocks() const { return static_cast<int64_t>(map_.size()); }
  uint64_t bytes() const { return bytes_; }
  bool contains(uint64_t hash) const { return map_.count(hash) != 0; }

  // Keeps r (replacing an entry of the same hash) as the most recently used; returns the entries
  // the budget pushed out, least recently used first (r itself when it alone passes the budget).
  std::vector<KvBlockRecord> put(KvBlockRecord r);
  // The entry of this content, removed from the tier; nullopt when absent or another content
  // holds the hash (a collision).
  std::optional<KvBlockRecord> take(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  // Every entry, least recently used first (persistence at shutdown reads them).
  const std::list<KvBlockRecord>& entries() const { return lru_; }

 private:
  uint64_t budget_;
  uint64_t bytes_ = 0;
  std::list<KvBlockRecord> lru_;  // front: least recently used
  std::unordered_map<uint64_t, std::list<KvBlockRecord>::iterator> map_;
};

}  // namespace strata
