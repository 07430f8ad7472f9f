#include "kv/kv_cache.h"

#include "base/assert.h"

namespace strata {

int KvLayer::find(KvPartKind kind) const {
  for (size_t i = 0; i < parts_.size(); ++i)
    if (parts_[i].kind == kind) return static_cast<int>(i);
  return -1;
}

int KvLayer::find(std::string_view name) const {
  for (size_t i = 0; i < parts_.size(); ++i)
    if (parts_[i].name == name) return static_cast<int>(i);
  return -1;
}

KvCache::KvCache(const KvSpec& spec, int64_t n_ctx, int64_t n_batch) : layers_(spec.layers.size()) {
  STRATA_ASSERT(n_ctx > 0 && n_batch > 0);
  for (size_t il = 0; il < spec.layers.size(); ++il)
    for (const KvPartSpec& p : spec.layers[il].parts) {
      STRATA_ASSERT_MSG(p.type == KvType::f32, "KV rows are f32 today");
      layers_[il].parts_.push_back(
          KvPart{p.kind, p.name, RowCache(p.width, p.rows(n_ctx, n_batch), p.ring(n_ctx, n_batch))});
    }
}

size_t KvCache::bytes() const {
  size_t b = 0;
  for (const KvLayer& l : layers_)
    for (const KvPart& p : l.parts()) b += p.rows.bytes();
  return b;
}

}  // namespace strata
