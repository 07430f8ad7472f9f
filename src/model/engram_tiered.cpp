#include "model/engram_tiered.h"

namespace strata {

Status TieredEngramRows::rows(int engram_layer, std::span<const int64_t> row_ids, float* out) {
  return store_->rows(engram_layer, row_ids.data(), static_cast<int64_t>(row_ids.size()), out);
}

Status TieredEngramRows::prefetch(int engram_layer, std::span<const int64_t> row_ids) {
  if (engram_layer == 0) {
    store_->end_step();
    store_->begin_step(static_cast<int64_t>(row_ids.size()) / std::max(1, n_cols_));
  }
  store_->prefetch(engram_layer, row_ids.data(), static_cast<int64_t>(row_ids.size()));
  return {};
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
  return std::make_unique<TieredEngramRows>(std::move(store), c.n_hash_cols());
}

Result<std::unique_ptr<TieredEngramRows>> v41_use_tiered_engram(V41Loaded& loaded,
                                                                const EngramStoreOptions& o) {
  STRATA_ASSIGN(auto src, open_tiered_engram_rows(*loaded.dir, loaded.model->cfg, o));
  // V41Loaded hands the model out as const; the object itself is not (load_deepseek_v41_dir
  // allocates it), and engram_rows is the documented replacement point (v41_forward.h).
  const_cast<v41::V41Model*>(loaded.model)->engram_rows = src.get();
  return src;
}

}  // namespace strata
