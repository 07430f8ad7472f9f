// Sizes with K/M/G suffixes (KiB/MiB/GiB), as every CLI flag that takes a size accepts them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace strata {

// "800M" -> 838860800, "4096" -> 4096, "1.5G" -> 1610612736. Suffixes K/M/G/T (case-insensitive,
// optional trailing "B" or "iB"). Errors name the offending text.
Result<uint64_t> parse_size(std::string_view text);

// 838860800 -> "800.0 MiB"
std::string format_bytes(uint64_t bytes);

}  // namespace strata
