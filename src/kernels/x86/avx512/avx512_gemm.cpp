// AVX-512 register-tiled products: up to kTileRows weight rows × kTileTokens activation rows per
// call, so each weight block is loaded and decoded once per tile and each activation block once
// per row group (decode: 4 rows share one activation load; prefill: 4×4 products per decode).
//
// 32-element block types against Q8_0 activations, two blocks per 512-bit register, one VPDPBUSD
// (unsigned × signed bytes) per row and token:
//   Q8_0 weights are signed: activations offset to unsigned u = x ^ 0x80, the row's −128·Σw
//     (shared by every token) seeds the products;
//   Q4_0 / MXFP4 weights decode to unsigned bytes (nibble, or LUT value + 12) against the signed
//     activations, each token's −offset·Σx (shared by every row) seeds the products.
// Int32 lanes are scaled per block and accumulated in f32 lanes, so a tile equals vec_dot up to
// f32 summation order.
// F16 / BF16 weights against F16 / BF16 activations: f32 FMA / VDPBF16PS per (row, token).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/tile_table.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}
inline __m512 scale2(float a, float b) {  // lanes 0..7 = a, 8..15 = b
  return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}
inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}

// 2^(e−128) (quant/fp8_fp4's e8m0_to_f32_half, inline: it runs per row and block).
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

// Q8_0 weights (signed): two blocks → 64 int8 in element order, scales as lanes 0..7 / 8..15.
// Activations go in offset to unsigned (x ^ 0x80) and each row's −128·Σw seeds its products.
template <int R, int T>
void tile_q8_0(int64_t n, const void* w, size_t ws, const void* const* x, float* const* y) {
  const int64_t nb = n / 32;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; i += 2) {
    const bool pair = i + 1 < nb;
    const int64_t j = pair ? i + 1 : i;
    __m512i xu[T];
    __m512 xd[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x[t]);
      xu[t] = _mm512_xor_si512(join(load256(xb[i].qs), load256(xb[j].qs)), bias);
      xd[t] = scale2(h2f(xb[i].d), pair ? h2f(xb[j].d) : 0.0f);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const BlockQ8_0* wb = reinterpret_cast<const BlockQ8_0*>(at(w, static_cast<size_t>(r) * ws));
      const __m512i wq = join(load256(wb[i].qs), load256(wb[j].qs));
      const __m512 wd = scale2(h2f(wb[i].d), h2f(wb[j].d));
      const __m512i neg =
          _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, wq));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m512i p = _mm512_dpbusd_epi32(neg, xu[t], wq);
        acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(wd, xd[t]), _mm512_cvtepi32_ps(p), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t][r] = _mm512_reduce_add_ps(acc[r][t]);
}

// 4-bit weights decoded to unsigned bytes u = value + kOffset, so VPDPBUSD takes them against the
// signed activations directly; each token's −kOffset·Σx (per 4-byte group) seeds its products.
// Two blocks a, b load as one 256-bit [qs_a | qs_b]; low and high nibbles give the 512-bit order
// [a 0..15 | b 0..15 | a 16..31 | b 16..31], and the activations are permuted to match (once per
// token, shared by the tile's rows). Scales: lanes [a a a a b b b b a a a a b b b b].
struct U4Q4_0 {
  using Block = BlockQ4_0;
  static constexpr int kOffset = 8;  // value = nibble − 8
  static __m512i q(__m512i nib) { return nib; }
  static float d(const Block& b) { return h2f(b.d); }
};
struct U4Mxfp4 {
  using Block = BlockMxfp4;
  static constexpr int kOffset = 12;  // doubled E2M1 (kMxfp4Values2x) + 12 ∈ [0, 24]
  static __m512i q(__m512i nib) {
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    return _mm512_shuffle_epi8(lut, nib);
  }
  static float d(const Block& b) { return e8m0_half(b.e); }
};

inline __m512 scale_abab(float a, float b) {
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_unpacklo_ps(_mm_set_ss(a), _mm_set_ss(b))));
}

template <class Dec, int R, int T>
void tile_u4(int64_t n, const void* w, size_t ws, const void* const* x, float* const* y) {
  using Block = typename Dec::Block;
  const int64_t nb = n / 32;
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i off = _mm512_set1_epi8(Dec::kOffset);
  __m512 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; i += 2) {
    const bool pair = i + 1 < nb;
    const int64_t j = pair ? i + 1 : i;
    __m512i xs[T], corr[T];
    __m512 xd[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x[t]);
      // [a lo | a hi | b lo | b hi] → [a lo | b lo | a hi | b hi]
      const __m512i xv = join(load256(xb[i].qs), load256(xb[j].qs));
      xs[t] = _mm512_shuffle_i64x2(xv, xv, 0xD8);
      corr[t] =
          _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, xs[t]));
      xd[t] = scale_abab(h2f(xb[i].d), pair ? h2f(xb[j].d) : 0.0f);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const Block* wb = reinterpret_cast<const Block*>(at(w, static_cast<size_t>(r) * ws));
      const __m256i v = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].qs))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[j].qs)), 1);
      const __m512i wq = Dec::q(_mm512_and_si512(join(v, _mm256_srli_epi16(v, 4)), m4));
      const __m512 wd = scale_abab(Dec::d(wb[i]), Dec::d(wb[j]));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m512i p = _mm512_dpbusd_epi32(corr[t], wq, xs[t]);
        acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(wd, xd[t]), _mm512_cvtepi32_ps(p), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t][r] = _mm512_reduce_add_ps(acc[r][t]);
}

inline __m512 f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 f16x16_tail(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

template <int R, int T>
void tile_f16(int64_t n, const void* w, size_t ws, const void* const* x, float* const* y) {
  __m512 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  const uint16_t* wr[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const uint16_t*>(at(w, static_cast<size_t>(r) * ws));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 xv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xv[t] = f16x16(static_cast<const uint16_t*>(x[t]) + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 wv = f16x16(wr[r] + i);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 xv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xv[t] = f16x16_tail(static_cast<const uint16_t*>(x[t]) + i, m);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 wv = f16x16_tail(wr[r] + i, m);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t][r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <int R, int T>
void tile_bf16(int64_t n, const void* w, size_t ws, const void* const* x, float* const* y) {
  __m512 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  const uint16_t* wr[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const uint16_t*>(at(w, static_cast<size_t>(r) * ws));
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 m =
        n - i >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1ull << (n - i)) - 1);
    __m512bh xv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      xv[t] = (__m512bh)_mm512_maskz_loadu_epi16(m, static_cast<const uint16_t*>(x[t]) + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, wr[r] + i);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t][r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <int R, int T>
struct Q8_0K {
  static constexpr TileFn f = tile_q8_0<R, T>;
};
template <int R, int T>
struct Q4_0K {
  static constexpr TileFn f = tile_u4<U4Q4_0, R, T>;
};
template <int R, int T>
struct Mxfp4K {
  static constexpr TileFn f = tile_u4<U4Mxfp4, R, T>;
};
template <int R, int T>
struct F16K {
  static constexpr TileFn f = tile_f16<R, T>;
};
template <int R, int T>
struct Bf16K {
  static constexpr TileFn f = tile_bf16<R, T>;
};

static_assert(kGemmTileRows == 4 && kGemmTileTokens == 4, "tile tables are 4 × 4");

}  // namespace

void gemm_q8_0_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y) {
  pick_tile<Q8_0K, kGemmTileTokens>(nr, nt)(n, w, ws, x, y);
}
void gemm_q4_0_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                    float* const* y) {
  pick_tile<Q4_0K, kGemmTileTokens>(nr, nt)(n, w, ws, x, y);
}
void gemm_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt,
                     float* const* y) {
  pick_tile<Mxfp4K, kGemmTileTokens>(nr, nt)(n, w, ws, x, y);
}
void gemm_f16(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt, float* const* y) {
  pick_tile<F16K, kGemmTileTokens>(nr, nt)(n, w, ws, x, y);
}
void gemm_bf16(int64_t n, const void* w, size_t ws, int nr, const void* const* x, int nt, float* const* y) {
  pick_tile<Bf16K, kGemmTileTokens>(nr, nt)(n, w, ws, x, y);
}

}  // namespace strata::x86::avx512
