#include "model/engram_tiered.h"

#include "format/safetensors_dir.h"

namespace strata {

Status TieredEngramRows::rows(int engram_layer, std::span<const int64_t> row_ids, float* out) {
  return store_->rows(engram_layer, row_ids.data(), static_cast<int64_t>(row_ids.size()), out);
}

void TieredEngramRows::begin_step(std::span<const int32_t> tokens) {
  store_->begin_step(static_cast<int64_t>(tokens.size()));
}

Status TieredEngramRows::prefetch(int engram_layer, std::span<const int64_t> row_ids) {
  store_->prefetch(engram_layer, row_ids.data(), static_cast<int64_t>(row_ids.size()));
  return {};
}

void TieredEngramRows::end_step() {
  store_->end_step();
}

Result<std::unique_ptr<TieredEngramRows>> open_tiered_engram_rows(const SafetensorsDir& dir,
                                                                  const v41::Config& c,
                                                                  EngramStoreOptions o) {
  if (c.engram_layers.empty())
    return err("%s: the model has no Engram layers (--engram-budget does not apply)", dir.dir().c_str());
  std::vector<EngramTable> tables;
  for (size_t k = 0; k < c.engram_layers.size(); ++k) {
    STRATA_ASSIGN(EngramTable t,
                  engram_table_from_checkpoint(dir, c.engram_layers[k], c.engram_rows[k], c.engram_head_dim));
    tables.push_back(std::move(t));
  }
  o.min_slots = c.n_hash_cols();
  STRATA_ASSIGN(auto store, EngramStore::open(std::move(tables), o));
  return std::make_unique<TieredEngramRows>(std::move(store));
}

}  // namespace strata
