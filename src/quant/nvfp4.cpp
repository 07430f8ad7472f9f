// NVFP4 in ggml's layout (GGML type 40, qtypes.h BlockNvfp4): 64-element blocks of four 16-element
// sub-blocks, each an E2M1 nibble per element times its own UE4M3 scale byte d[s]:
//   value = E2M1(nibble) · scale(d[s]) = kMxfp4Values2x[nibble] · kNvfp4ScaleHalf[d[s]]
// (both from quant/fp8_fp4.h; bytes ggml can write all read as ggml reads them). Byte j of
// sub-block s, qs[8s + j], holds element 16s + j (low nibble) and 16s + j + 8 (high nibble).
// The vec_dot pairs a block with two Q8_0 activation blocks (sub-blocks 0-1, 2-3).
#include <cmath>

#include "base/fp16.h"
#include "quant/fp8_fp4.h"
#include "quant/quant_ref.h"

namespace strata {

void to_float_nvfp4(const void* src, float* dst, int64_t n) {
  const BlockNvfp4* b = static_cast<const BlockNvfp4*>(src);
  constexpr int kHalf = QK_NVFP4_SUB / 2;
  for (int64_t i = 0; i < n / QK_NVFP4; ++i) {
    for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; ++s) {
      const float d = kNvfp4ScaleHalf[b[i].d[s]];
      const uint8_t* q = b[i].qs + s * kHalf;
      float* y = dst + i * QK_NVFP4 + s * QK_NVFP4_SUB;
      for (int j = 0; j < kHalf; ++j) {
        y[j] = static_cast<float>(kMxfp4Values2x[q[j] & 0x0f]) * d;
        y[j + kHalf] = static_cast<float>(kMxfp4Values2x[q[j] >> 4]) * d;
      }
    }
  }
}

namespace {

// The nibble of the E2M1 value nearest x/scale (+0 for a zero).
uint8_t nvfp4_nibble(float x, float scale) {
  const float r = e2m1_round(x / scale);
  return r == 0.0f ? 0 : f32_to_e2m1(r);
}

// Σ (x − scale·E2M1(x/scale))² over a sub-block.
float nvfp4_sub_error(const float* x, float scale) {
  float e = 0.0f;
  for (int j = 0; j < QK_NVFP4_SUB; ++j) {
    const float d = x[j] - scale * e2m1_round(x[j] / scale);
    e += d * d;
  }
  return e;
}

// The UE4M3 scale byte of one sub-block, the candidate of least squared error (the first of equal
// ones): the code nearest amax/6 (no element clips) and the five around it (smaller scales clip
// the largest element but may fit the rest better), and the codes nearest amax/v for the other
// E2M1 magnitudes v (the largest element exactly on v), which makes any sub-block of E2M1 values
// times one representable scale, MXFP4's blocks among them, round-trip exactly.
uint8_t nvfp4_pick_scale(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < QK_NVFP4_SUB; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  if (!(amax > 0.0f)) return 0;
  const int base = f32_to_ue4m3(std::fmin(amax / 6.0f, 448.0f));  // fmin also stops +inf
  int best = base < 1 ? 1 : base;
  float best_err = nvfp4_sub_error(x, ue4m3_to_f32(static_cast<uint8_t>(best)));
  if (best_err == 0.0f) return static_cast<uint8_t>(best);  // exact: no later candidate beats it
  auto consider = [&](int c) {
    if (best_err == 0.0f || c < 1 || c > 0x7e || c == best) return;
    const float err = nvfp4_sub_error(x, ue4m3_to_f32(static_cast<uint8_t>(c)));
    if (err < best_err) {
      best = c;
      best_err = err;
    }
  };
  for (int c = base - 4; c <= base + 1; ++c) consider(c);
  for (float v : {4.0f, 3.0f, 2.0f, 1.5f, 1.0f, 0.5f}) consider(f32_to_ue4m3(std::fmin(amax / v, 448.0f)));
  return static_cast<uint8_t>(best);
}

}  // namespace

void from_float_nvfp4(const float* src, void* dst, int64_t n) {
  BlockNvfp4* b = static_cast<BlockNvfp4*>(dst);
  constexpr int kHalf = QK_NVFP4_SUB / 2;
  for (int64_t i = 0; i < n / QK_NVFP4; ++i) {
    for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; ++s) {
      const float* x = src + i * QK_NVFP4 + s * QK_NVFP4_SUB;
      const uint8_t code = nvfp4_pick_scale(x);
      b[i].d[s] = code;
      const float scale = nvfp4_scale_to_f32(code);
      uint8_t* q = b[i].qs + s * kHalf;
      for (int j = 0; j < kHalf; ++j) {
        q[j] =
            scale > 0.0f
                ? static_cast<uint8_t>(nvfp4_nibble(x[j], scale) | (nvfp4_nibble(x[j + kHalf], scale) << 4))
                : 0;
      }
    }
  }
}

float vec_dot_nvfp4_q8_0(int64_t n, const void* w, const void* x) {
  const BlockNvfp4* a = static_cast<const BlockNvfp4*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  constexpr int kHalf = QK_NVFP4_SUB / 2;
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_NVFP4; ++i) {
    for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; ++s) {
      const BlockQ8_0& xb = b[2 * i + s / 2];
      const int8_t* xq = xb.qs + (s % 2) * QK_NVFP4_SUB;
      const uint8_t* q = a[i].qs + s * kHalf;
      int32_t si = 0;
      for (int j = 0; j < kHalf; ++j) {
        si += kMxfp4Values2x[q[j] & 0x0f] * xq[j];
        si += kMxfp4Values2x[q[j] >> 4] * xq[j + kHalf];
      }
      sum += (fp16_to_f32(xb.d) * kNvfp4ScaleHalf[a[i].d[s]]) * static_cast<float>(si);
    }
  }
  return sum;
}

}  // namespace strata
