// KvCache: one sequence's attention memory, per layer, made of named parts.
//
// A standard attention layer has two parts, K [pos][n_head_kv*head_dim_k] and
// V [pos][n_head_kv*head_dim_v]; a sliding-window layer keeps them in rings sized window - 1 +
// n_batch (the oldest key a batch's first query needs, plus the batch itself). Other
// architectures add their own parts per layer (deepseek4: compressed entries, indexer keys,
// compressor rolling state) through add_part(); nothing here knows what a part means.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/row_cache.h"

namespace strata {

enum class KvPartKind {
  kv_part_k,           // keys, one row per position
  kv_part_v,           // values, one row per position
  kv_part_compressed,  // compressed entries (one row per block of `ratio` positions)
  kv_part_indexer,     // indexer keys (deepseek4 CSA)
  kv_part_state,       // rolling state (e.g. compressor rows of the partial block)
};

struct KvPart {
  KvPartKind kind;
  std::string name;  // for stats / debugging ("k", "v", "comp", ...)
  RowCache rows;
};

class KvLayer {
 public:
  // Returns the index of the new part (stable).
  int add_part(KvPartKind kind, std::string name, int64_t width, int64_t capacity, bool ring);
  int find(KvPartKind kind) const;  // -1 if absent
  RowCache& part(int i) { return parts_[i].rows; }
  const RowCache& part(int i) const { return parts_[i].rows; }
  const std::vector<KvPart>& parts() const { return parts_; }

 private:
  std::vector<KvPart> parts_;
};

class KvCache {
 public:
  explicit KvCache(int n_layer) : layers_(n_layer) {}
  KvLayer& layer(int il) { return layers_[il]; }
  const KvLayer& layer(int il) const { return layers_[il]; }
  int n_layer() const { return static_cast<int>(layers_.size()); }
  size_t bytes() const;

  // Standard layer: K and V parts; ring when window > 0 (capacity min(n_ctx, window-1+n_batch)).
  void add_standard_layer(int il, int64_t k_width, int64_t v_width, int64_t n_ctx, int64_t window,
                          int64_t n_batch);

 private:
  std::vector<KvLayer> layers_;
};

}  // namespace strata
