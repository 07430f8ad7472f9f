// The tiered Engram store (memory/engram_store.h) as the V4.1 forward's EngramRowSource
// (model/v41_engram.h): the forward announces each step's rows of every Engram layer through
// prefetch() before layer 0 (the store starts the reads there) and reads them with rows().
//
// The forward has no step hook of its own, so prefetch() of Engram layer 0 — which it issues
// first, once per step, whether or not the store prefetches — opens the store's step (its
// token count = rows / n_hash_cols), which keeps the per-token statistics.
#pragma once

#include <memory>

#include "memory/engram_store.h"
#include "model/v41_arch.h"
#include "model/v41_engram.h"

namespace strata {

class TieredEngramRows final : public v41::EngramRowSource {
 public:
  TieredEngramRows(std::unique_ptr<EngramStore> store, int n_hash_cols)
      : store_(std::move(store)), n_cols_(n_hash_cols) {}
  Status rows(int engram_layer, std::span<const int64_t> row_ids, float* out) override;
  Status prefetch(int engram_layer, std::span<const int64_t> row_ids) override;
  EngramStore& store() { return *store_; }
  const EngramStore& store() const { return *store_; }

 private:
  std::unique_ptr<EngramStore> store_;
  int n_cols_;
};

// Opens a store over the checkpoint's Engram tables (every engram_layer_ids entry, validated
// by engram_table_from_checkpoint) with o.min_slots = one token's rows of one layer.
Result<std::unique_ptr<TieredEngramRows>> open_tiered_engram_rows(const SafetensorsDir& dir,
                                                                  const v41::Config& c, EngramStoreOptions o);

// Opens the store for a loaded checkpoint and makes the model read its Engram rows from it
// (the returned source must outlive every forward of that model). Error if the model has no
// Engram layers.
Result<std::unique_ptr<TieredEngramRows>> v41_use_tiered_engram(V41Loaded& loaded,
                                                                const EngramStoreOptions& o);

}  // namespace strata
