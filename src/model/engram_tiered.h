// The tiered Engram store (memory/engram_store.h) as the V4.1 forward's EngramRowSource
// (model/v41_engram.h). load_deepseek_v41_dir opens it when given an Engram budget: the weights
// then hold no table (v41_weights.h), and every row the forward reads comes through the store,
// dequantised on use from the table's stored dtype (memory/engram_table.h).
//
// The forward's step maps onto the store's: begin_step(tokens) opens a store step of
// tokens.size() tokens (the per-token statistics), prefetch() starts the reads of that step's
// rows, rows() waits only for what is missing, end_step() closes the step.
#pragma once

#include <memory>

#include "memory/engram/engram_store.h"
#include "model/deepseek_v41/v41_config.h"
#include "model/deepseek_v41/v41_engram.h"

namespace strata {

class SafetensorsDir;  // format/safetensors_dir.h

class TieredEngramRows final : public v41::EngramRowSource {
 public:
  explicit TieredEngramRows(std::unique_ptr<EngramStore> store) : store_(std::move(store)) {}
  Status rows(int engram_layer, std::span<const int64_t> row_ids, float* out) override;
  void begin_step(std::span<const int32_t> tokens) override;
  Status prefetch(int engram_layer, std::span<const int64_t> row_ids) override;
  void end_step() override;
  EngramStore& store() { return *store_; }
  const EngramStore& store() const { return *store_; }

 private:
  std::unique_ptr<EngramStore> store_;
};

// Opens a store over the checkpoint's Engram tables (every engram_layer_ids entry, validated
// by engram_table_from_checkpoint: dtype, shape, shard) with o.min_slots = one token's rows of
// one layer. Error if the model has no Engram layers.
Result<std::unique_ptr<TieredEngramRows>> open_tiered_engram_rows(const SafetensorsDir& dir,
                                                                  const v41::Config& c, EngramStoreOptions o);

}  // namespace strata
