// The deepseek_v41 (DeepSeek-V4.1-Flash) Architecture, loaded from an official-layout checkpoint
// directory: config.json + *.safetensors (model.safetensors.index.json when sharded) +
// engram_meta.json (when the config lists Engram layers).
//
// Model::load takes GGUF files; until it dispatches directories here (one line in model.cpp),
// callers use load_deepseek_v41_dir() and drive the Architecture directly.
#pragma once

#include <memory>
#include <string>

#include "model/arch.h"
#include "model/v41_forward.h"

namespace strata {

struct V41Loaded {
  std::unique_ptr<SafetensorsDir> dir;  // keeps the shards mapped (weights are copied, see v41_weights.h)
  std::unique_ptr<Architecture> arch;
  const v41::V41Model* model = nullptr;  // owned by arch
};

Result<V41Loaded> load_deepseek_v41_dir(const std::string& dir);

// True if `path` is a directory holding config.json (what Model::load should route here).
bool is_v41_checkpoint_dir(const std::string& path);

}  // namespace strata
