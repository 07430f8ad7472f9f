#include "kv/kv_cache.h"

#include <string>
#include <utility>

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

Result<KvCache> KvCache::on_device(const KvSpec& spec, int64_t n_ctx, int64_t n_batch, Device& dev) {
  STRATA_ASSERT(n_ctx > 0 && n_batch > 0);
  KvCache c;
  c.layers_.resize(spec.layers.size());
  for (size_t il = 0; il < spec.layers.size(); ++il)
    for (const KvPartSpec& p : spec.layers[il].parts) {
      STRATA_ASSERT_MSG(p.type == KvType::f32, "KV rows are f32 today");
      const std::string what = "KV layer " + std::to_string(il) + " part " + p.name;
      STRATA_ASSIGN(RowCache rows,
                    RowCache::on_device(dev, p.width, p.rows(n_ctx, n_batch), p.ring(n_ctx, n_batch), what));
      c.layers_[il].parts_.push_back(KvPart{p.kind, p.name, std::move(rows)});
    }
  return c;
}

size_t KvCache::bytes() const {
  size_t b = 0;
  for (const KvLayer& l : layers_)
    for (const KvPart& p : l.parts()) b += p.rows.bytes();
  return b;
}

}  // namespace strata
