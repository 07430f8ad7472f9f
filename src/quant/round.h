// Round-half-to-even float → int for |v| < 2^22, without depending on the FP environment's
// library calls: adding 1.5·2^23 pushes the fraction out of the mantissa, and the hardware's
// default rounding (nearest even) does the rest. Same result as _mm_round_ps(NEAREST) and
// ggml's nearest_int.
#pragma once

#include <cstdint>
#include <cstring>

namespace strata {

inline int round_half_even(float v) {
  float t = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

}  // namespace strata
