// Q4_K's 12-byte scale/min packing, inline so the SIMD kernels unpack it without a call.
// Sub-blocks 0..3 keep scale and min in the low 6 bits of bytes j and j+4; sub-blocks 4..7 keep
// their low 4 bits in byte j+4 (scale low nibble, min high nibble) and their top 2 bits in the
// spare high bits of bytes j−4 (scale) and j (min).
#pragma once

#include <cstdint>

namespace strata {

inline void q4_k_unpack_scales(const uint8_t s[12], uint8_t sc[8], uint8_t m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((s[j + 8] & 0x0f) | ((s[j] >> 6) << 4));
    m[j + 4] = static_cast<uint8_t>((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
  }
}

}  // namespace strata
