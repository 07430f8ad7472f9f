// FP8 KV rows (quant/quant_ref.h, qtypes.h BlockFp8E4m3): 32 E4M3 values and one UE8M0 scale, the
// codecs quant/fp8_fp4's.
#include <algorithm>
#include <array>
#include <cmath>

#include "quant/fp8_fp4.h"
#include "quant/quant_ref.h"

namespace strata {

namespace {
// e4m3_to_f32 of every byte (attention converts each key row per query head)
const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> a{};
    for (int b = 0; b < 256; ++b) a[static_cast<size_t>(b)] = e4m3_to_f32(static_cast<uint8_t>(b));
    return a;
  }();
  return t;
}
}  // namespace

void to_float_fp8_e4m3(const void* src, float* dst, int64_t n) {
  const BlockFp8E4m3* b = static_cast<const BlockFp8E4m3*>(src);
  const std::array<float, 256>& e4m3 = e4m3_table();
  for (int64_t i = 0; i < n / QK_FP8; ++i) {
    const float s = ue8m0_to_f32(b[i].e);
    for (int j = 0; j < QK_FP8; ++j) dst[i * QK_FP8 + j] = e4m3[b[i].qs[j]] * s;
  }
}

void from_float_fp8_e4m3(const float* src, void* dst, int64_t n) {
  BlockFp8E4m3* b = static_cast<BlockFp8E4m3*>(dst);
  for (int64_t i = 0; i < n / QK_FP8; ++i) {
    const float* x = src + i * QK_FP8;
    float amax = 0.0f;
    for (int j = 0; j < QK_FP8; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    b[i].e = ue8m0_ceil_code(std::max(amax, 1e-4f) * (1.0f / 448.0f));
    const float s = ue8m0_to_f32(b[i].e);
    for (int j = 0; j < QK_FP8; ++j) b[i].qs[j] = f32_to_e4m3(std::clamp(x[j] / s, -448.0f, 448.0f));
  }
}

}  // namespace strata
