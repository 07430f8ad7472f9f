// KvCheckpoints: snapshots of a sequence's sliding-window rows at a block boundary, so that the
// prefix cache serves models whose layers are not all full attention (gpt-oss; llama.cpp's
// `--ctx-checkpoints` idea, keyed here by the block chain). The paged pool (kv/kv_pool.h) holds
// the full-attention parts of a cached prefix; a window part's ring is the sequence's own and is
// overwritten as it moves on, so a prefix of B positions is reusable only where the window rows
// before B were saved: the last `window − 1` rows of every window part (what a query at B reads),
// named by the hash of the chain's block ending at B.
//
// The engine saves one when a prompt's prefill completes, when a sequence is preempted and when it
// finishes (KvCache::save_checkpoint; at most one per boundary); a prefix lookup then stops at the last block
// boundary that has one, and the new sequence's rings are written from it (KvCache::restore_checkpoint), so
// its rows are the bits a recompute would write. At most `capacity` snapshots (least recently used dropped).
// Not thread-safe (KvPool serializes its calls).
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace strata {

struct KvCheckpoint {
  int64_t end = 0;             // the boundary: each window part's last `keep` rows before it (KvWindowPart)
  std::vector<uint8_t> bytes;  // part after part (KvPool's window parts in layer order), row after row
};

struct KvCheckpointStats {
  int64_t count = 0, capacity = 0;
  uint64_t bytes = 0;                             // held now
  uint64_t saved = 0, restored = 0, dropped = 0;  // cumulative
};

class KvCheckpoints {
 public:
  explicit KvCheckpoints(int64_t capacity) : capacity_(capacity) {}
  bool contains(uint64_t hash) const { return map_.count(hash) > 0; }
  // Stores (or replaces) the snapshot named `hash`; the least recently used beyond capacity go.
  void put(uint64_t hash, KvCheckpoint c);
  // The snapshot named `hash` (most recently used now; valid until the next put), or null.
  const KvCheckpoint* find(uint64_t hash);
  void count_restored() { ++restored_; }
  KvCheckpointStats stats() const;

 private:
  struct Entry {
    KvCheckpoint c;
    std::list<uint64_t>::iterator at;
  };
  int64_t capacity_;
  std::unordered_map<uint64_t, Entry> map_;
  std::list<uint64_t> lru_;  // most recently used first
  uint64_t bytes_ = 0, saved_ = 0, restored_ = 0, dropped_ = 0;
};

}  // namespace strata
