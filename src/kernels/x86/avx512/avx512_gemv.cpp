// AVX-512 one-token product (decode) for BF16: y[r] = W_r · x for a run of rows, 32 weights per
// VDPBF16PS against the bf16 activations as they come. F16 is avx512_gemv_f16.cpp, the 32-element
// block types avx512_gemv_q.cpp, the K-quants avx512_gemv_k.cpp.
// Each equals vec_dot per row up to f32 summation order.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/avx512/avx512_kernels.h"

namespace strata::x86::avx512 {
namespace {

inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}

// Each row group prefetches, as it goes, the same bytes of the rows kPrefetchGroups groups below
// (decode streams weights from DRAM; the hardware prefetchers alone left the kernels waiting:
// 65536-row products 8–9 → 13–21 GB/s per thread). Prefetches past the matrix do not fault.
constexpr int kPrefetchGroups = 2;
inline void prefetch(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}

// ---- BF16 ----
// The row loop, parameterised by the step: BF16 takes 32 weights per VDPBF16PS against the bf16
// activations as they come.

struct StepBF16 {
  using X = uint16_t;
  static constexpr int64_t kN = 32;
  static __m512 fma(__m512 acc, const uint16_t* w, const uint16_t* x) {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(w), (__m512bh)_mm512_loadu_si512(x));
  }
  static __m512 fma_tail(__m512 acc, const uint16_t* w, const uint16_t* x, int64_t len) {
    const __mmask32 m = static_cast<__mmask32>((1ull << len) - 1);
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_maskz_loadu_epi16(m, w),
                            (__m512bh)_mm512_maskz_loadu_epi16(m, x));
  }
};

// y[r] (+)= W_r[0, len) · x[0, len) for R rows ws bytes apart; each 64 bytes of a row prefetch the
// same bytes kPrefetchGroups row groups below.
template <class S, int R>
void w16_rows(const typename S::X* x, int64_t len, const uint16_t* w, size_t ws, float* y, bool add) {
  __m512 acc[R];
  const uint16_t* wr[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    wr[r] = reinterpret_cast<const uint16_t*>(at(w, static_cast<size_t>(r) * ws));
  }
  int64_t i = 0;
  for (; i + S::kN <= len; i += S::kN) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if ((i & 31) == 0) prefetch(at(wr[r] + i, kPrefetchGroups * R * ws));
      acc[r] = S::fma(acc[r], wr[r] + i, x + i);
    }
  }
  if (i < len) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = S::fma_tail(acc[r], wr[r] + i, x + i, len - i);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const float v = _mm512_reduce_add_ps(acc[r]);
    y[r] = add ? y[r] + v : v;
  }
}

// nr rows in groups of kR (then one by one) against len activations.
template <class S>
void w16_gemv(const typename S::X* x, int64_t len, const uint16_t* w, size_t ws, int64_t nr, float* y,
              bool add) {
  constexpr int kR = 4;
  int64_t r = 0;
  for (; r + kR <= nr; r += kR)
    w16_rows<S, kR>(x, len, reinterpret_cast<const uint16_t*>(at(w, static_cast<size_t>(r) * ws)), ws, y + r,
                    add);
  for (; r < nr; ++r)
    w16_rows<S, 1>(x, len, reinterpret_cast<const uint16_t*>(at(w, static_cast<size_t>(r) * ws)), ws, y + r,
                   add);
}

}  // namespace

void gemv_bf16(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  w16_gemv<StepBF16>(static_cast<const uint16_t*>(x), n, static_cast<const uint16_t*>(w), ws, nr, y, false);
}

}  // namespace strata::x86::avx512
