// AVX-512 one-token product (decode) for F16 weights: y[r] = W_r · x.
//
// The bits are the F16 panel's (avx512_gemm_panel_f16.cpp) with one token, so decode may take it
// under batch invariance (KernelTraits::gemv_invariant): per K chunk of kChunk elements, one f32
// accumulator of 16 lanes per row, lane l summing w[i]·x[i] for i ≡ l (mod 16) in order by
// VFMADD231PS of VCVTPH2PS-widened weights against f32 activations, the chunk reduced by
// _mm512_reduce_add_ps and added to the row's previous chunks in order.
//
// The loop order is decode's own: the nr rows are cut into kR quarters and row j of every
// quarter is computed side by side, each row whole, chunk after chunk (the activations of up to
// kPassChunks chunks widened once per call and held in L1/L2). Each of the kR streams then walks
// its quarter's rows as one sequential read (rows are contiguous in a matrix), prefetching
// kPrefetchAhead bytes ahead: the read pattern at which `strata bench --membw` (obs/membw.h,
// "4x+pf") sees this machine's best bandwidth. The former order — every row's chunk k before any
// row's chunk k + 1, 4 adjacent rows side by side — visited each 4 KiB page of a d-2048 matrix
// twice a row block apart, with streams 4 KiB long: 2 threads of an AVX-512 Xeon read 2 GB of
// F16 matrices that way at 9.5–11 GB/s, this way at 11.5–16 (interleaved, a scratch harness).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/avx512/avx512_kernels.h"

namespace strata::x86::avx512 {
namespace {

constexpr int64_t kChunk = 1024;         // the F16 panel's K chunk: the bits depend on it
constexpr int64_t kPassChunks = 8;       // activations widened per pass: 8 chunks = 32 KiB of f32
constexpr int kR = 4;                    // streams (row quarters) side by side
constexpr size_t kPrefetchAhead = 1024;  // bytes ahead in a stream (past a row's end: the next row)

// y[r·q] (+)= W_{r·q}[0, len) · x[0, len) for R rows r·q rows apart (rows ws bytes apart),
// len <= kPassChunks·kChunk, chunk by chunk; first: y is written by the first chunk (else added to).
template <int R>
void rows_pass(const float* x, int64_t len, const uint8_t* w, size_t ws, int64_t q, float* y, bool first) {
  const uint8_t* wr[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) wr[r] = w + static_cast<size_t>(r * q) * ws;
  for (int64_t c0 = 0; c0 < len; c0 += kChunk) {
    const int64_t c1 = std::min(len, c0 + kChunk);
    __m512 acc[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    int64_t i = c0;
    for (; i + 16 <= c1; i += 16) {
      const __m512 xv = _mm512_load_ps(x + i);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* p = wr[r] + 2 * i;
        if ((i & 31) == 0) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead), _MM_HINT_T0);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), xv,
                                 acc[r]);
      }
    }
    if (i < c1) {  // the row's last len % 16 elements (x is zero-padded)
      const __mmask16 m = static_cast<__mmask16>((1u << (c1 - i)) - 1);
      const __m512 xv = _mm512_load_ps(x + i);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, wr[r] + 2 * i)), xv, acc[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float s = _mm512_reduce_add_ps(acc[r]);
      y[r * q] = first && c0 == 0 ? s : y[r * q] + s;
    }
  }
}

}  // namespace

void gemv_f16(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  constexpr int64_t kPass = kPassChunks * kChunk;
  alignas(64) float xf[kPass];
  const uint16_t* xh = static_cast<const uint16_t*>(x);
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int64_t k0 = 0; k0 < n; k0 += kPass) {
    const int64_t len = std::min(kPass, n - k0);
    int64_t i = 0;
    for (; i + 16 <= len; i += 16)
      _mm512_store_ps(xf + i,
                      _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xh + k0 + i))));
    if (i < len) {
      const __mmask16 m = static_cast<__mmask16>((1u << (len - i)) - 1);
      _mm512_store_ps(xf + i, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, xh + k0 + i)));
    }
    const bool first = k0 == 0;
    const uint8_t* wk = wb + 2 * k0;
    const int64_t q = nr / kR;  // rows per quarter; the nr % kR last rows one by one
    for (int64_t j = 0; j < q; ++j)
      rows_pass<kR>(xf, len, wk + static_cast<size_t>(j) * ws, ws, q, y + j, first);
    for (int64_t r = kR * q; r < nr; ++r)
      rows_pass<1>(xf, len, wk + static_cast<size_t>(r) * ws, ws, 1, y + r, first);
  }
}

}  // namespace strata::x86::avx512
