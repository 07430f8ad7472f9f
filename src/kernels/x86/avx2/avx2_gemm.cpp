// AVX2 register tiles (kernels/traits.h GemmTileFn) for CPUs without AVX-512: up to 4 weight rows
// × 4 activation rows per call. AVX2 has 16 vector registers, so a call runs as passes of up to
// kPassTokens tokens (4 rows × 2 tokens = 8 accumulators plus operands): each weight block is
// decoded once per pass and read from L1 by the next pass, each activation block once per pass.
//
// 32-element block types against Q8_0 activations, int8 products through VPMADDUBSW (unsigned ×
// signed, pair sums in int16) and VPMADDWD into int32 lanes, scaled per block into f32 lanes:
//   Q8_0 weights are signed: |w| against sign(x, w) (PRECOND of avx2_util.h's dot_i8x32: no
//     activation byte is −128; weights may be);
//   Q4_0 / MXFP4 weights decode to unsigned bytes (nibble, or doubled E2M1 + 12) against the signed
//     activations; each token's offset·(x pair sums), shared by every row, is subtracted in int16.
// F16 weights against F16 activations: f32 FMA per (row, token), the n % 8 tail in scalar f32.
// Every tile equals vec_dot per element up to f32 summation order.
#include <immintrin.h>

#include "kernels/traits.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/tile_table.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx2 {
namespace {

constexpr int kPassTokens = 2;

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}
inline __m256 bcast_h(uint16_t h) {
  return _mm256_set1_ps(h2f(h));
}

// 2^(e−128) (quant/fp8_fp4's e8m0_to_f32_half, inline: it runs per row and block).
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

// Weight decoders: rows(block) gives the operand(s) a block's products need, prod() the 16
// int16 pair sums of one row block with one token block, exact.
struct DecQ8_0 {
  using Block = BlockQ8_0;
  struct Row {
    __m256i abs_w, w;
  };
  static Row row(const Block& b) {
    const __m256i w = load256(b.qs);
    return {_mm256_sign_epi8(w, w), w};
  }
  static __m256i prod(const Row& r, __m256i x, __m256i /*corr*/) {
    return _mm256_maddubs_epi16(r.abs_w, _mm256_sign_epi8(x, r.w));
  }
  static __m256i corr(__m256i /*x*/) { return _mm256_setzero_si256(); }
  static __m256 d(const Block& b) { return bcast_h(b.d); }
};

// 4-bit weights as unsigned bytes u = value + kOffset in element order (low nibbles, then high).
template <class B, int Offset>
struct DecU4 {
  using Block = B;
  struct Row {
    __m256i u;
  };
  static __m256i prod(const Row& r, __m256i x, __m256i corr) {
    return _mm256_sub_epi16(_mm256_maddubs_epi16(r.u, x), corr);
  }
  // Offset · (x_2k + x_2k+1), the pair sums' share of the offset.
  static __m256i corr(__m256i x) { return _mm256_maddubs_epi16(_mm256_set1_epi8(Offset), x); }
};
struct DecQ4_0 : DecU4<BlockQ4_0, 8> {
  static Row row(const Block& b) { return {nibbles_32(b.qs)}; }
  static __m256 d(const Block& b) { return bcast_h(b.d); }
};
struct DecMxfp4 : DecU4<BlockMxfp4, 12> {
  static Row row(const Block& b) {
    // kMxfp4Values2x + 12 ∈ [0, 24].
    const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0, 12, 13,
                                         14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    return {_mm256_shuffle_epi8(lut, nibbles_32(b.qs))};
  }
  static __m256 d(const Block& b) { return _mm256_set1_ps(e8m0_half(b.e)); }
};

// Rows w (R of them, ws bytes apart) × tokens x[0..T): y[t][r].
template <class Dec, int R, int T>
void pass_q32(int64_t nb, const void* w, size_t ws, const void* const* x, float* const* y) {
  using Block = typename Dec::Block;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i xv[T], corr[T];
    __m256 dx[T];
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0& xb = static_cast<const BlockQ8_0*>(x[t])[i];
      xv[t] = load256(xb.qs);
      corr[t] = Dec::corr(xv[t]);
      dx[t] = bcast_h(xb.d);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const Block& wb = reinterpret_cast<const Block*>(at(w, r * ws))[i];
      const typename Dec::Row row = Dec::row(wb);
      const __m256 dw = Dec::d(wb);
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        const __m256i p = _mm256_madd_epi16(Dec::prod(row, xv[t], corr[t]), ones);
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx[t]), _mm256_cvtepi32_ps(p), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) y[t][r] = hsum_f32x8(acc[r][t]);
}

inline __m256 f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <int R, int T>
void pass_f16(int64_t n, const void* w, size_t ws, const void* const* x, float* const* y) {
  const uint16_t* wr[R];
  const uint16_t* xr[T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const uint16_t*>(at(w, r * ws));
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) xr[t] = static_cast<const uint16_t*>(x[t]);
  __m256 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 xv[T];
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) xv[t] = f16x8(xr[t] + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 wv = f16x8(wr[r] + i);
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      float s = hsum_f32x8(acc[r][t]);
      for (int64_t j = i; j < n; ++j) s += h2f(wr[r][j]) * h2f(xr[t][j]);
      y[t][r] = s;
    }
  }
}

template <int R, int T>
struct Q8_0K {
  static constexpr TileFn f = pass_q32<DecQ8_0, R, T>;
};
template <int R, int T>
struct Q4_0K {
  static constexpr TileFn f = pass_q32<DecQ4_0, R, T>;
};
template <int R, int T>
struct Mxfp4K {
  static constexpr TileFn f = pass_q32<DecMxfp4, R, T>;
};
template <int R, int T>
struct F16K {
  static constexpr TileFn f = pass_f16<R, T>;
};

static_assert(kGemmTileRows == 4, "pass tables have 4 rows");

}  // namespace

void gemm_q8_0_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y) {
  run_in_passes<Q8_0K, kPassTokens>(n / QK8_0, w, ws, nr, x, nt, y);
}
void gemm_q4_0_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y) {
  run_in_passes<Q4_0K, kPassTokens>(n / QK4_0, w, ws, nr, x, nt, y);
}
void gemm_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                     float* const* y) {
  run_in_passes<Mxfp4K, kPassTokens>(n / QK_MXFP4, w, ws, nr, x, nt, y);
}
void gemm_f16(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt, float* const* y) {
  run_in_passes<F16K, kPassTokens>(n, w, ws, nr, x, nt, y);
}

}  // namespace strata::x86::avx2
