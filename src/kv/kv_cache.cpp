#include "kv/kv_cache.h"

#include <algorithm>
#include <utility>

namespace strata {

int KvLayer::add_part(KvPartKind kind, std::string name, int64_t width, int64_t capacity, bool ring) {
  parts_.push_back(KvPart{kind, std::move(name), RowCache(width, capacity, ring)});
  return static_cast<int>(parts_.size()) - 1;
}

int KvLayer::find(KvPartKind kind) const {
  for (size_t i = 0; i < parts_.size(); ++i)
    if (parts_[i].kind == kind) return static_cast<int>(i);
  return -1;
}

size_t KvCache::bytes() const {
  size_t b = 0;
  for (const KvLayer& l : layers_)
    for (const KvPart& p : l.parts()) b += p.rows.bytes();
  return b;
}

void KvCache::add_standard_layer(int il, int64_t k_width, int64_t v_width, int64_t n_ctx, int64_t window,
                                 int64_t n_batch) {
  int64_t cap = n_ctx;
  bool ring = false;
  if (window > 0 && window - 1 + n_batch < n_ctx) {
    cap = window - 1 + n_batch;
    ring = true;
  }
  KvLayer& l = layers_[il];
  l.add_part(KvPartKind::kv_part_k, "k", k_width, cap, ring);
  l.add_part(KvPartKind::kv_part_v, "v", v_width, cap, ring);
}

}  // namespace strata
