// The deepseek_v41 (DeepSeek-V4.1-Flash) Architecture, loaded from an official-layout checkpoint
// directory: config.json + *.safetensors (model.safetensors.index.json when sharded) +
// engram_meta.json (when the config lists Engram layers). Its registry entry (model/arch.cpp,
// source checkpoint_dir) is what Model::load finds for such a directory.
#pragma once

#include <memory>
#include <string>

#include "memory/engram/engram_store.h"
#include "memory/experts/expert_store.h"
#include "model/arch.h"
#include "model/engram_tiered.h"
#include "model/deepseek_v41/v41_forward.h"

namespace strata {

struct V41Loaded {
  std::unique_ptr<SafetensorsDir> dir;  // keeps the shards mapped (weights are copied, see v41_weights.h)
  std::unique_ptr<Architecture> arch;
  const v41::V41Model* model = nullptr;  // owned by arch
  // With an Engram budget: the store the model reads its Engram rows from (keep it alive as long
  // as arch runs forwards); null when the tables are resident with the weights.
  std::unique_ptr<TieredEngramRows> engram;
  // With expert options: the expert store of the routed experts (v41_experts.h); new states take
  // it as StateOptions::experts. Null without.
  std::unique_ptr<ExpertStore> experts;
};

// engram.budget_bytes > 0: the Engram tables are not loaded with the weights; a tiered store of
// that budget over the checkpoint file serves them (RAM tier when they fit, else the SSD tier
// behind a row cache). 0: the tables are loaded with the weights (f32, resident).
// numerics: fast (strata's kernels, native weights) or oracle (the reference's exact orders, f32
// weights; tests), v41_forward.h.
// experts: open the expert store with these options (fast numerics only): with a budget the
// routed experts are read from the shards on demand, without one it serves the resident stacks
// (statistics, traces). Null: no store.
Result<V41Loaded> load_deepseek_v41_dir(const std::string& dir, const EngramStoreOptions& engram = {},
                                        v41::V41Numerics numerics = v41::V41Numerics::fast,
                                        const ExpertStoreOptions* experts = nullptr);

}  // namespace strata
