// KvCache: one sequence's attention memory, per layer, made of named parts, allocated from the
// architecture's KvSpec (kv/kv_spec.h) for a context of n_ctx positions and steps of up to n_batch
// tokens: part p of layer il holds spec.layers[il].parts[p].rows(n_ctx, n_batch) rows, addressed
// modulo that count when the part is a window shorter than the context. Nothing here knows what a
// part means; bytes() equals the spec's bytes(n_ctx, n_batch). A part's rows are stored in its
// spec's type (kv_storage_type); quantized parts hold Hadamard-rotated head slices unless
// `rotate` is off (kernels/kv_rows.h). PRECOND: every part's type supported (kv_spec_check).
//
// Paged (KvCache::paged): the parts the pool pages (kv/kv_pool.h: full parts) are views of the
// pool through this sequence's block table, the others the sequence's own rows on the pool's
// device; bytes() counts only those. The blocks go back to the pool on release_blocks() and
// when the cache goes.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kv/kv_spec.h"
#include "base/status.h"
#include "kv/row_cache.h"

namespace strata {

class BlockTable;
class KvPool;

struct KvPart {
  KvPartKind kind;
  std::string name;  // the spec's name ("k", "v", "window", "comp", ...)
  RowCache rows;
};

class KvLayer {
 public:
  int find(KvPartKind kind) const;        // first part of that kind, -1 if absent
  int find(std::string_view name) const;  // -1 if absent
  RowCache& part(int i) { return parts_[i].rows; }
  const RowCache& part(int i) const { return parts_[i].rows; }
  const std::vector<KvPart>& parts() const { return parts_; }

 private:
  friend class KvCache;
  std::vector<KvPart> parts_;
};

// The spec's parts can be stored as their types say: each type runs (kv_type_supported) and a
// part's rows (and heads of `head_width` values, 0: the row) hold whole blocks. The error names
// the architecture `arch`, the part and the type.
Status kv_spec_check(const KvSpec& spec, const char* arch, int64_t head_width = 0);

class KvCache {
 public:
  KvCache() = default;
  KvCache(const KvSpec& spec, int64_t n_ctx, int64_t n_batch, bool rotate = true);
  KvCache(KvCache&& o) noexcept;
  KvCache& operator=(KvCache&& o) noexcept;
  ~KvCache();
  // Every part in buffers of `dev` (RowCache::on_device); errors name the part and the device's budget.
  static Result<KvCache> on_device(const KvSpec& spec, int64_t n_ctx, int64_t n_batch, Device& dev,
                                   bool rotate = true);
  // The pool's parts through a block table of its own (the pool made from the same spec and
  // rotation; it outlives the cache; an error when the spec's types differ from the pool's), the
  // others on the pool's device.
  static Result<KvCache> paged(const KvSpec& spec, int64_t n_ctx, int64_t n_batch, KvPool& pool,
                               bool rotate = true);
  BlockTable* blocks() { return table_.get(); }  // null unless paged
  void release_blocks();                         // paged: every block back to the pool
  // Paged on a pool that keeps checkpoints (kv/kv_checkpoints.h): save the window parts' rows
  // before the last named block boundary at or before n_past (when the rings still hold them and
  // none is kept for that boundary yet); write a prefix's saved rows back into the rings (n: the
  // positions adopted, where the table's blocks end; an error when none is kept). Else nothing.
  Status save_checkpoint(int64_t n_past);
  Status restore_checkpoint(int64_t n);
  KvLayer& layer(int il) { return layers_[il]; }
  const KvLayer& layer(int il) const { return layers_[il]; }
  int n_layer() const { return static_cast<int>(layers_.size()); }
  size_t bytes() const;

 private:
  std::vector<KvLayer> layers_;
  std::unique_ptr<BlockTable> table_;  // paged: stable (the views point at its ids)
  KvPool* pool_ = nullptr;
};

}  // namespace strata
