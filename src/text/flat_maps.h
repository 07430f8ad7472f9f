// Open-addressing hash tables for vocabulary lookups. Loading a 150k-token vocab does ~1M
// lookups (tokens, merge halves, merge results); node-based std::unordered_map spends most of
// that time in cache misses and mallocs, these tables need one or two probes into flat arrays.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text {

// Token text -> id. The texts themselves live in the caller's vector (passed to every call), so
// the index stays valid when the owner is moved.
class TokenIndex {
 public:
  // Indexes texts[0..n). Returns -1, or the id of the first text equal to an earlier one
  // (*first_id set to that earlier id).
  int32_t build(const std::vector<std::string>& texts, int32_t* first_id);
  int32_t find(std::string_view s, const std::vector<std::string>& texts) const;

 private:
  std::vector<uint64_t> slots_;  // (hash >> 32) << 32 | (id + 1); 0 = empty
  uint64_t mask_ = 0;
};

// (left id, right id) -> (rank, result id) for BPE merges; the first insert of a pair wins.
class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  void reserve(size_t n);
  void insert(int32_t left, int32_t right, Merge m);
  const Merge* find(int32_t left, int32_t right) const;
  size_t size() const { return size_; }

 private:
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t slot(uint64_t k) const;
  std::vector<uint64_t> keys_;  // kEmpty = free
  std::vector<Merge> vals_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace strata::text
