#include "kv/block_pool.h"

#include <algorithm>

#include "base/assert.h"

namespace strata {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {  // splitmix64's finalizer over h ^ v
  uint64_t z = (h ^ v) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t block_hash(uint64_t parent, std::span<const int32_t> tokens, uint64_t salt) {
  uint64_t h = mix(mix(0x6b76706f6f6cull, parent), salt);
  h = mix(h, tokens.size());
  for (int32_t t : tokens) h = mix(h, static_cast<uint32_t>(t));
  return h == 0 ? 1 : h;  // 0 means "no hash"
}

BlockTable::BlockTable(int32_t max_blocks, int block_size)
    : ids_(new int32_t[static_cast<size_t>(max_blocks)]),
      hashes_(static_cast<size_t>(max_blocks), 0),
      max_(max_blocks),
      block_size_(block_size) {
  STRATA_ASSERT(max_blocks > 0 && block_size > 0);
  std::fill(ids_.get(), ids_.get() + max_blocks, -1);
}

BlockPool::BlockPool(int32_t n_blocks, int block_size)
    : block_size_(block_size),
      ref_(static_cast<size_t>(n_blocks), 0),
      hash_(static_cast<size_t>(n_blocks), 0),
      parent_(static_cast<size_t>(n_blocks), 0),
      tokens_(static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size), 0),
      prev_(static_cast<size_t>(n_blocks), -1),
      next_(static_cast<size_t>(n_blocks), -1) {
  STRATA_ASSERT(n_blocks > 0 && block_size > 0);
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 is handed out first
}

void BlockPool::lru_unlink(int32_t b) {
  const size_t i = static_cast<size_t>(b);
  (prev_[i] >= 0 ? next_[static_cast<size_t>(prev_[i])] : lru_head_) = next_[i];
  (next_[i] >= 0 ? prev_[static_cast<size_t>(next_[i])] : lru_tail_) = prev_[i];
  prev_[i] = next_[i] = -1;
  --n_lru_;
}

void BlockPool::lru_push_back(int32_t b) {
  const size_t i = static_cast<size_t>(b);
  prev_[i] = lru_tail_;
  next_[i] = -1;
  (lru_tail_ >= 0 ? next_[static_cast<size_t>(lru_tail_)] : lru_head_) = b;
  lru_tail_ = b;
  ++n_lru_;
}

Result<std::vector<int32_t>> BlockPool::allocate(int32_t n, std::vector<EvictedBlock>* evicted) {
  if (n < 0 || n > available())
    return err("KV pool: %d blocks wanted, %d available (%d free, %d cached) of %d", n, available(),
               static_cast<int>(free_.size()), n_lru_, n_blocks());
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  while (static_cast<int32_t>(out.size()) < n) {
    int32_t b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {  // evict the least recently freed cached block
      b = lru_head_;
      lru_unlink(b);
      if (evicted) {
        const auto t = tokens(b);
        evicted->push_back(EvictedBlock{b, hash_[static_cast<size_t>(b)], parent_[static_cast<size_t>(b)],
                                        std::vector<int32_t>(t.begin(), t.end())});
      }
      by_hash_.erase(hash_[static_cast<size_t>(b)]);
      hash_[static_cast<size_t>(b)] = 0;
      ++evicted_;
    }
    ref_[static_cast<size_t>(b)] = 1;
    out.push_back(b);
  }
  return out;
}

int32_t BlockPool::acquire(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || static_cast<int>(tokens.size()) != block_size_) return -1;
  const int32_t b = it->second;
  const size_t i = static_cast<size_t>(b);
  if (parent_[i] != parent ||
      !std::equal(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<ptrdiff_t>(i * block_size_)))
    return -1;  // a collision: not this content
  if (ref_[i] == 0) lru_unlink(b);
  if (++ref_[i] == 2) ++shared_;
  return b;
}

void BlockPool::release(int32_t b) {
  const size_t i = static_cast<size_t>(b);
  STRATA_ASSERT(b >= 0 && i < ref_.size() && ref_[i] > 0);
  if (ref_[i]-- == 2) --shared_;
  if (ref_[i] > 0) return;
  if (hash_[i] != 0)
    lru_push_back(b);
  else
    free_.push_back(b);
}

bool BlockPool::commit(int32_t b, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  const size_t i = static_cast<size_t>(b);
  STRATA_ASSERT(b >= 0 && i < ref_.size() && ref_[i] > 0 && hash != 0);
  STRATA_ASSERT(static_cast<int>(tokens.size()) == block_size_);
  if (hash_[i] != 0 || by_hash_.count(hash)) return false;
  hash_[i] = hash;
  parent_[i] = parent;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<ptrdiff_t>(i * block_size_));
  by_hash_.emplace(hash, b);
  return true;
}

BlockCounts BlockPool::counts() const {
  BlockCounts c;
  c.total = n_blocks();
  c.free = static_cast<int64_t>(free_.size());
  c.cached = n_lru_;
  c.used = c.total - c.free - c.cached;
  c.shared = shared_;
  c.evicted = evicted_;
  return c;
}

}  // namespace strata
