#include "kv/kv_cache.h"

#include <string>
#include <utility>

#include "base/assert.h"
#include "kv/kv_pool.h"

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

KvCache::KvCache(KvCache&& o) noexcept {
  *this = std::move(o);
}

KvCache& KvCache::operator=(KvCache&& o) noexcept {
  if (this == &o) return *this;
  release_blocks();
  layers_ = std::move(o.layers_);
  table_ = std::move(o.table_);
  pool_ = o.pool_;
  o.pool_ = nullptr;
  return *this;
}

KvCache::~KvCache() {
  release_blocks();
}

void KvCache::release_blocks() {
  if (pool_ && table_) pool_->release(*table_);
}

Result<KvCache> KvCache::paged(const KvSpec& spec, int64_t n_ctx, int64_t n_batch, KvPool& pool) {
  STRATA_ASSERT(n_ctx > 0 && n_batch > 0);
  KvCache c;
  c.table_ = std::make_unique<BlockTable>(pool.new_table(n_ctx));
  c.pool_ = &pool;
  c.layers_.resize(spec.layers.size());
  for (size_t il = 0; il < spec.layers.size(); ++il)
    for (size_t p = 0; p < spec.layers[il].parts.size(); ++p) {
      const KvPartSpec& ps = spec.layers[il].parts[p];
      const int l = static_cast<int>(il), q = static_cast<int>(p);
      if (pool.pages(l, q)) {
        c.layers_[il].parts_.push_back(KvPart{ps.kind, ps.name, pool.rows(l, q, *c.table_)});
        continue;
      }
      STRATA_ASSERT_MSG(ps.type == KvType::f32, "KV rows are f32 today");
      const std::string what = "KV layer " + std::to_string(il) + " part " + ps.name;
      STRATA_ASSIGN(RowCache rows, RowCache::on_device(pool.device(), ps.width, ps.rows(n_ctx, n_batch),
                                                       ps.ring(n_ctx, n_batch), what));
      c.layers_[il].parts_.push_back(KvPart{ps.kind, ps.name, std::move(rows)});
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
