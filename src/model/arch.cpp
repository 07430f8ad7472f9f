#include "model/arch.h"

#include <array>

#include "model/ds4_arch.h"

namespace strata {

namespace {

// An explicit table rather than self-registering statics: arch files live in a static library,
// and an object file nothing references would be dropped by the linker with its registrar.
const std::array kArchs = {
    ArchEntry{"qwen3moe", &make_arch_qwen3moe},   ArchEntry{"llama", &make_arch_llama},
    ArchEntry{"qwen2moe", &make_arch_qwen2moe},   ArchEntry{"gpt-oss", &make_arch_gpt_oss},
    ArchEntry{"deepseek4", &make_arch_deepseek4},
};

}  // namespace

std::span<const ArchEntry> arch_registry() {
  return kArchs;
}

Status Architecture::forward_decode_batch(std::span<ArchState* const>, std::span<const int32_t>,
                                          std::span<const int64_t>, float*, ThreadPool&) const {
  return err("architecture '%s' has no batched decode", hparams().arch.c_str());
}

const ArchEntry* arch_find(std::string_view name) {
  for (const ArchEntry& e : kArchs)
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace strata
