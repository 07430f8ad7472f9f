#include "kv/kv_cache.h"

#include <algorithm>
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

Status kv_spec_check(const KvSpec& spec, const char* arch, int64_t head_width) {
  for (size_t il = 0; il < spec.layers.size(); ++il)
    for (const KvPartSpec& p : spec.layers[il].parts) {
      const KvType t = p.stored_as(p.type);
      if (!kv_type_supported(t))
        return err("%s: KV type %s is not implemented (KV types: %s)", arch, kv_type_name(t),
                   kv_supported_names().c_str());
      const int64_t bs = type_info(kv_storage_type(t)).block_size;
      if (p.width % bs != 0 || (head_width > 0 && head_width % bs != 0))
        return err(
            "%s: KV type %s stores blocks of %lld values; layer %zu's %s rows (%lld values, heads of %lld) "
            "are not whole blocks",
            arch, kv_type_name(t), static_cast<long long>(bs), il, p.name.c_str(),
            static_cast<long long>(p.width), static_cast<long long>(head_width));
    }
  return {};
}

KvCache::KvCache(const KvSpec& spec, int64_t n_ctx, int64_t n_batch, bool rotate)
    : layers_(spec.layers.size()) {
  STRATA_ASSERT(n_ctx > 0 && n_batch > 0);
  for (size_t il = 0; il < spec.layers.size(); ++il)
    for (const KvPartSpec& p : spec.layers[il].parts) {
      const KvType t = p.stored_as(p.type);
      STRATA_ASSERT_MSG(kv_type_supported(t), "KV part of a type strata cannot store");
      RowCache rows(p.width, p.rows(n_ctx, n_batch), p.ring(n_ctx, n_batch), kv_storage_type(t));
      rows.set_hadamard(rotate && kv_type_quantized(t));
      layers_[il].parts_.push_back(KvPart{p.kind, p.name, std::move(rows)});
    }
}

Result<KvCache> KvCache::on_device(const KvSpec& spec, int64_t n_ctx, int64_t n_batch, Device& dev,
                                   bool rotate) {
  STRATA_ASSERT(n_ctx > 0 && n_batch > 0);
  KvCache c;
  c.layers_.resize(spec.layers.size());
  for (size_t il = 0; il < spec.layers.size(); ++il)
    for (const KvPartSpec& p : spec.layers[il].parts) {
      const KvType t = p.stored_as(p.type);
      STRATA_ASSERT_MSG(kv_type_supported(t), "KV part of a type strata cannot store");
      const std::string what = "KV layer " + std::to_string(il) + " part " + p.name;
      STRATA_ASSIGN(RowCache rows, RowCache::on_device(dev, p.width, p.rows(n_ctx, n_batch),
                                                       p.ring(n_ctx, n_batch), what, kv_storage_type(t)));
      rows.set_hadamard(rotate && kv_type_quantized(t));
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

Result<KvCache> KvCache::paged(const KvSpec& spec, int64_t n_ctx, int64_t n_batch, KvPool& pool,
                               bool rotate) {
  STRATA_ASSERT(n_ctx > 0 && n_batch > 0);
  KvCache c;
  c.table_ = std::make_unique<BlockTable>(pool.new_table(n_ctx));
  c.pool_ = &pool;
  c.layers_.resize(spec.layers.size());
  for (size_t il = 0; il < spec.layers.size(); ++il)
    for (size_t p = 0; p < spec.layers[il].parts.size(); ++p) {
      const KvPartSpec& ps = spec.layers[il].parts[p];
      const int l = static_cast<int>(il), q = static_cast<int>(p);
      const KvType t = ps.stored_as(ps.type);
      STRATA_ASSERT_MSG(kv_type_supported(t), "KV part of a type strata cannot store");
      const bool rotated = rotate && kv_type_quantized(t);
      if (pool.pages(l, q)) {
        if (!pool.holds(l, q, kv_storage_type(t), rotated))
          return err(
              "KV layer %zu part %s: the KV pool does not hold %s%s rows (it was made for other KV types)",
              il, ps.name.c_str(), kv_type_name(t), rotated ? " rotated" : "");
        c.layers_[il].parts_.push_back(KvPart{ps.kind, ps.name, pool.rows(l, q, *c.table_)});
        continue;
      }
      const std::string what = "KV layer " + std::to_string(il) + " part " + ps.name;
      STRATA_ASSIGN(RowCache rows, RowCache::on_device(pool.device(), ps.width, ps.rows(n_ctx, n_batch),
                                                       ps.ring(n_ctx, n_batch), what, kv_storage_type(t)));
      rows.set_hadamard(rotated);
      c.layers_[il].parts_.push_back(KvPart{ps.kind, ps.name, std::move(rows)});
    }
  return c;
}

Status KvCache::save_checkpoint(int64_t n_past) {
  if (!pool_ || !table_ || !pool_->checkpoints_on()) return {};
  const auto want = pool_->checkpoint_wanted(*table_, n_past);
  if (!want) return {};
  const int64_t end = want->second;
  KvCheckpoint c;
  c.end = end;
  for (const KvWindowPart& w : pool_->window_parts()) {
    const RowCache& rc = layers_[static_cast<size_t>(w.il)].parts_[static_cast<size_t>(w.part)].rows;
    STRATA_ASSERT(rc.view().row_bytes == w.row_bytes);
    const int64_t lo = std::max<int64_t>(0, end - w.keep);
    if (rc.ring() && n_past - lo > rc.capacity()) return {};  // overwritten already: no snapshot here
    const size_t at = c.bytes.size();
    c.bytes.resize(at + static_cast<size_t>(end - lo) * w.row_bytes);
    STRATA_TRY(rc.read_rows(lo, end - lo, c.bytes.data() + at));
  }
  pool_->put_checkpoint(want->first, std::move(c));
  return {};
}

Status KvCache::restore_checkpoint(int64_t n) {
  if (!pool_ || !table_ || !pool_->checkpoints_on() || n == 0) return {};
  const std::optional<KvCheckpoint> c = pool_->checkpoint_of(*table_);
  if (!c || c->end != n)
    return err("KV checkpoint: none kept for the %lld positions of the adopted prefix",
               static_cast<long long>(n));
  size_t at = 0;
  for (const KvWindowPart& w : pool_->window_parts()) {
    RowCache& rc = layers_[static_cast<size_t>(w.il)].parts_[static_cast<size_t>(w.part)].rows;
    const int64_t lo = std::max<int64_t>(0, n - w.keep), bytes = (n - lo) * static_cast<int64_t>(w.row_bytes);
    if (at + static_cast<size_t>(bytes) > c->bytes.size())
      return err("KV checkpoint: %zu bytes, short", c->bytes.size());
    STRATA_TRY(rc.write_rows(lo, n - lo, c->bytes.data() + at));
    at += static_cast<size_t>(bytes);
  }
  return {};
}

size_t KvCache::bytes() const {
  size_t b = 0;
  for (const KvLayer& l : layers_)
    for (const KvPart& p : l.parts()) b += p.rows.bytes();
  return b;
}

}  // namespace strata
