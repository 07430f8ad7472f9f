// DeepSeek-V4.1's routed experts behind the tiered expert store (memory/experts/expert_store.h),
// read straight from the checkpoint's shards: `layers.L.ffn.experts.E.w{1,3,2}.weight` (+ `.scale`
// for FP4), FP4 parts transformed to MXFP4 in the slot (the fast path's resident stacks hold the
// same blocks), BF16 parts viewed in place; the routers' look-ahead ranks with V4.1's own score.
#pragma once

#include <memory>

#include "base/status.h"
#include "format/safetensors_dir.h"
#include "memory/experts/expert_store.h"
#include "model/deepseek_v41/v41_forward.h"

namespace strata::v41 {

// The catalog of the directory's routed experts (what `strata plan -m DIR` bills a budget by).
Result<ExpertCatalog> v41_expert_catalog(const SafetensorsDir& d, const Config& c);

// The store for a fast-numerics model m bound from d. With a budget m's weights hold no routed
// expert (bind_weights routed_experts = false): this gives xw1 / xw3 / xw2 their views' type and
// shape (no data) for the MoE loop, and the store serves the bytes; without one (statistics only)
// the store serves m's resident stacks.
Result<std::unique_ptr<ExpertStore>> open_v41_expert_store(const SafetensorsDir& d, V41Model& m,
                                                           const ExpertStoreOptions& o);

}  // namespace strata::v41
