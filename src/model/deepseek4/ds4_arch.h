// The deepseek4 (DeepSeek-V4) Architecture factory (arch_deepseek4.cpp). To be listed in the
// registry (model/arch.cpp) as {"deepseek4", &make_arch_deepseek4}.
#pragma once

#include <memory>

#include "model/arch.h"

namespace strata {

Result<std::unique_ptr<Architecture>> make_arch_deepseek4(const GgufFile& f);
Result<KvSpec> kv_spec_deepseek4(const GgufFile& f);

}  // namespace strata
