#include "text/flat_maps.h"

#include <functional>

#include "base/assert.h"

namespace strata::text {
namespace {

constexpr uint64_t kEmpty = ~0ull;  // ids are < 2^31, so no real pair key is all ones

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t capacity_for(size_t n) {
  uint64_t cap = 16;
  while (cap < 2 * n) cap <<= 1;  // load factor <= 1/2
  return cap;
}

uint64_t hash_text(std::string_view s) {
  return mix(std::hash<std::string_view>{}(s));
}

}  // namespace

int32_t TokenIndex::build(const std::vector<std::string>& texts, int32_t* first_id) {
  const uint64_t cap = capacity_for(texts.size());
  slots_.assign(cap, 0);
  mask_ = cap - 1;
  for (size_t id = 0; id < texts.size(); ++id) {
    const uint64_t h = hash_text(texts[id]);
    const uint64_t tag = h & 0xFFFFFFFF00000000ull;
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == 0) {
        slots_[i] = tag | (id + 1);
        break;
      }
      const uint32_t other = static_cast<uint32_t>(s) - 1;
      if ((s & 0xFFFFFFFF00000000ull) == tag && texts[other] == texts[id]) {
        *first_id = static_cast<int32_t>(other);
        return static_cast<int32_t>(id);
      }
    }
  }
  return -1;
}

int32_t TokenIndex::find(std::string_view s, const std::vector<std::string>& texts) const {
  if (slots_.empty()) return -1;
  const uint64_t h = hash_text(s);
  const uint64_t tag = h & 0xFFFFFFFF00000000ull;
  for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const uint64_t v = slots_[i];
    if (v == 0) return -1;
    if ((v & 0xFFFFFFFF00000000ull) != tag) continue;
    const uint32_t id = static_cast<uint32_t>(v) - 1;
    if (texts[id] == s) return static_cast<int32_t>(id);
  }
}

void MergeTable::reserve(size_t n) {
  const uint64_t cap = capacity_for(n);
  keys_.assign(cap, kEmpty);
  vals_.assign(cap, Merge{0, 0});
  mask_ = cap - 1;
  size_ = 0;
}

size_t MergeTable::slot(uint64_t k) const {
  for (uint64_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    if (keys_[i] == k || keys_[i] == kEmpty) return i;
  }
}

void MergeTable::insert(int32_t left, int32_t right, Merge m) {
  if (2 * (size_ + 1) > keys_.size()) {  // grow: rehash into double the space
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<Merge> old_vals = std::move(vals_);
    reserve(old_keys.empty() ? 8 : old_keys.size());
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] == kEmpty) continue;
      const size_t j = slot(old_keys[i]);
      keys_[j] = old_keys[i];
      vals_[j] = old_vals[i];
      ++size_;
    }
  }
  const uint64_t k = key(left, right);
  const size_t i = slot(k);
  if (keys_[i] == k) return;  // first rank wins, as llama.cpp's emplace
  keys_[i] = k;
  vals_[i] = m;
  ++size_;
}

const MergeTable::Merge* MergeTable::find(int32_t left, int32_t right) const {
  if (keys_.empty()) return nullptr;
  const uint64_t k = key(left, right);
  const size_t i = slot(k);
  return keys_[i] == k ? &vals_[i] : nullptr;
}

}  // namespace strata::text
