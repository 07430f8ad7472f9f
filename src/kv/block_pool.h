// BlockPool: the bookkeeping of a paged KV pool, apart from its bytes (kv/kv_pool.h holds those):
// block ids 0..n-1, a reference count per block, the free list, and the prefix cache — a full
// block can carry the hash of its content (block_hash: the parent block's hash, its tokens, the KV
// type), and a block whose last reference goes keeps its hash and waits in an LRU list until a new
// allocation evicts it (the least recently freed first). A lookup checks the stored parent hash
// and tokens too, so a hash collision is a miss, never another sequence's rows.
//
// BlockTable: one sequence's blocks in position order (block k holds positions k·block_size ..),
// in a fixed array (the KvRows views of kernels/kv_rows.h point at it), with the chain hash of each
// full block that was committed.
//
// Plan, then apply: available() says what allocate() can hand out; allocate() of more than that
// fails and changes nothing. Not thread-safe (kv/KvPool serializes).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace strata {

// The chain hash of a full block: its parent's hash (0 for the first block), its tokens and a
// salt naming everything else that changes its rows (the KV type).
uint64_t block_hash(uint64_t parent, std::span<const int32_t> tokens, uint64_t salt);

class BlockTable {
 public:
  BlockTable() = default;
  BlockTable(int32_t max_blocks, int block_size);
  int block_size() const { return block_size_; }
  int32_t max_blocks() const { return max_; }
  int32_t size() const { return n_; }
  int64_t rows() const { return int64_t{n_} * block_size_; }  // positions the held blocks cover
  int32_t id(int32_t k) const { return ids_[k]; }
  const int32_t* ids() const { return ids_.get(); }  // [max_blocks], entries >= size() are -1
  int32_t n_hashed() const { return n_hashed_; }     // blocks 0..n_hashed-1 have chain hashes
  uint64_t hash(int32_t k) const { return hashes_[static_cast<size_t>(k)]; }
  // Mixed into the salt of this sequence's block hashes (model/arch.h SeqKnobs::salt: rows made
  // under other per-sequence knobs are other rows); set while the table is empty.
  void set_salt(uint64_t s) { salt_ = s; }
  uint64_t salt() const { return salt_; }

 private:
  friend class BlockPool;
  friend class KvPool;
  void push(int32_t id) { ids_[n_++] = id; }
  std::unique_ptr<int32_t[]> ids_;
  std::vector<uint64_t> hashes_;
  int32_t max_ = 0, n_ = 0, n_hashed_ = 0;
  int64_t held_ = 0;  // positions the sequence asked for (KvPool: the last block's unused rows)
  int block_size_ = 0;
  uint64_t salt_ = 0;
};

// A cached block that allocate() handed out again: what it held (the spill tiers keep its rows
// under this name: kv/kv_spill.h).
struct EvictedBlock {
  int32_t block = -1;
  uint64_t hash = 0, parent = 0;
  std::vector<int32_t> tokens;
};

struct BlockCounts {
  int64_t total = 0;
  int64_t used = 0;     // referenced by a sequence
  int64_t free = 0;     // neither referenced nor cached
  int64_t cached = 0;   // unreferenced, hashed: reusable until evicted (LRU)
  int64_t shared = 0;   // referenced by more than one sequence
  int64_t evicted = 0;  // cached blocks handed out again (cumulative)
};

class BlockPool {
 public:
  BlockPool(int32_t n_blocks, int block_size);
  int32_t n_blocks() const { return static_cast<int32_t>(ref_.size()); }
  int block_size() const { return block_size_; }
  int32_t available() const { return static_cast<int32_t>(free_.size()) + n_lru_; }
  int32_t refs(int32_t b) const { return ref_[static_cast<size_t>(b)]; }
  bool cached(int32_t b) const { return hash_[static_cast<size_t>(b)] != 0; }

  // n blocks referenced once each, free ones first, then the least recently freed cached ones
  // (their hashes are dropped; evicted, when given, gets what each of those held). Error (nothing
  // changed) when fewer than n are available.
  Result<std::vector<int32_t>> allocate(int32_t n, std::vector<EvictedBlock>* evicted = nullptr);
  // The cached block of this content (its hash, parent hash and tokens), -1 if none; a hit takes a
  // reference (out of the LRU list if it was unreferenced).
  int32_t acquire(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  // Drops a reference; at zero the block goes to the LRU list (hashed) or the free list.
  void release(int32_t b);
  // Names a full, referenced block's content. False (nothing changed) when another block already
  // holds that hash or this one has one.
  bool commit(int32_t b, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  BlockCounts counts() const;
  // A hashed block's name: its hash (0: none), parent hash and tokens.
  uint64_t hash(int32_t b) const { return hash_[static_cast<size_t>(b)]; }
  uint64_t parent(int32_t b) const { return parent_[static_cast<size_t>(b)]; }
  std::span<const int32_t> tokens(int32_t b) const {
    return std::span<const int32_t>(tokens_).subspan(
        static_cast<size_t>(b) * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_));
  }

 private:
  void lru_unlink(int32_t b);
  void lru_push_back(int32_t b);
  int block_size_;
  std::vector<int32_t> ref_;
  std::vector<uint64_t> hash_, parent_;  // hash_ 0: not cached
  std::vector<int32_t> tokens_;          // [n_blocks][block_size] of hashed blocks
  std::vector<int32_t> free_;            // a stack
  std::vector<int32_t> prev_, next_;     // the LRU list of unreferenced hashed blocks
  int32_t lru_head_ = -1, lru_tail_ = -1, n_lru_ = 0;
  int64_t shared_ = 0, evicted_ = 0;
  std::unordered_map<uint64_t, int32_t> by_hash_;
};

}  // namespace strata
