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

size_t KvCache::bytes() const {
  size_t b = 0;
  for (const KvLayer& l : layers_)
    for (const KvPart& p : l.parts()) b += p.rows.bytes();
  return b;
}

}  // namespace strata
