// AVX-512 one-token products (decode) for 32-element block weights against Q8_0 activations:
// Q8_0, Q4_0 and MXFP4, with the bits of the many-token panel (avx512_gemm_panel.cpp), so decode
// and a batch give every output the same value (KernelTraits::gemv_invariant).
//
// The panel computes each output block after block as acc = fma(isum, dw·dx, acc), isum the
// block's exact integer dot. Here too lanes hold weight rows: a group of 16 rows walks the blocks,
// and per block the 16 rows' integer dots are reduced into one register (lane l = row l) before one
// conversion, one multiply of the rows' scales by dx and one FMA serve all 16 rows. The dots come
// straight from the stored blocks (no repacking), against x broadcast from its block:
//   Q8_0   two rows' 32 quant bytes per register (w ^ 0x80 = w + 128, unsigned), 8 registers of
//          8 dwords per row, reduced in three unpack/shuffle + add levels;
//   Q4_0   four rows' 16 quant bytes per register, low nibbles against x 0..15 and high nibbles
//          against x 16..31 into one VPDPBUSD chain: 4 registers of 4 dwords per row, two levels;
//   MXFP4  as Q4_0, the nibbles LUT-decoded to 2·E2M1 + 12 ∈ [0, 24] (the panel's values).
// The offset comes back out as the panel's −kOffset·Σx per block, added after the reduction (the
// int32 sums are exact, so where it enters does not matter). The 16 rows' block scales come from one
// VPGATHERDD per block of the dword at each row's block start (a scalar gather through a stack ring
// cost Q4_0 a third of its speed); the row offsets are int32, so 15 rows of stride ws must span
// less than 2 GiB.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>

#include "base/assert.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

constexpr int kRows = 16;  // rows per group: one register of lanes
constexpr int kSeg = 64;   // activation blocks whose sums and scales are held per segment (2048 elements)

inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}
inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 16 bytes at off of rows r, r+4, r+8, r+12 as the four 128-bit lanes of one register.
inline __m512i rows4(const uint8_t* const* rp, int r, size_t off) {
  __m512i v = _mm512_castsi128_si512(load128(rp[r] + off));
  v = _mm512_inserti32x4(v, load128(rp[r + 4] + off), 1);
  v = _mm512_inserti32x4(v, load128(rp[r + 8] + off), 2);
  return _mm512_inserti32x4(v, load128(rp[r + 12] + off), 3);
}

// p[m] 128-bit lane L holding 4 partial sums of row 4L + m → lane 4L + m = their sum.
inline __m512i reduce4(const __m512i (&p)[4]) {
  const __m512i u0 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
  const __m512i u1 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(u0, u1), _mm512_unpackhi_epi64(u0, u1));
}

// 2^(e−128) (quant/fp8_fp4's e8m0_to_f32_half) for 16 exponents, as the panel converts them.
inline __m512 e8m0_half16(__m512i e) {
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, sub));
}

// Per type: the block, the offset of its unsigned quants, scales(): the 16 rows' block scales as
// f32 from the dwords at their blocks' starts, and dots(): the 16 rows' Σ u·x for one block at
// byte offset off of every row.
struct GQ8_0 {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 128;
  static __m512 scales(__m512i h) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)); }
  static __m512i dots(const uint8_t* const* rp, size_t off, const BlockQ8_0& xb) {
    const __m512i x = _mm512_broadcast_i64x4(load256(reinterpret_cast<const uint8_t*>(xb.qs)));
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    const size_t q = off + offsetof(Block, qs);
    // p[k] = [row k | row k + 4] (k < 4), p[4 + k] = [row 8 + k | row 12 + k]: 8 dwords per row.
    __m512i p[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const int r = k < 4 ? k : k + 4;
      const __m512i w =
          _mm512_inserti64x4(_mm512_castsi256_si512(load256(rp[r] + q)), load256(rp[r + 4] + q), 1);
      p[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(w, bias), x);
    }
    // Two levels within each 128-bit lane: v[h] lane L, dword m = Σ of p[4h + m]'s lane L.
    __m512i v[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i* ph = p + 4 * h;
      const __m512i u0 =
          _mm512_add_epi32(_mm512_unpacklo_epi32(ph[0], ph[1]), _mm512_unpackhi_epi32(ph[0], ph[1]));
      const __m512i u1 =
          _mm512_add_epi32(_mm512_unpacklo_epi32(ph[2], ph[3]), _mm512_unpackhi_epi32(ph[2], ph[3]));
      v[h] = _mm512_add_epi32(_mm512_unpacklo_epi64(u0, u1), _mm512_unpackhi_epi64(u0, u1));
    }
    // A row's two lanes summed: [rows 0..3 | 4..7 | 8..11 | 12..15].
    return _mm512_add_epi32(_mm512_shuffle_i32x4(v[0], v[1], 0x88), _mm512_shuffle_i32x4(v[0], v[1], 0xDD));
  }
};

// Nibble blocks (byte k holds elements k and k + 16), Derived::map: nibble → unsigned value.
template <class Derived, class B>
struct Nibbles {
  using Block = B;
  static __m512i dots(const uint8_t* const* rp, size_t off, const BlockQ8_0& xb) {
    const __m512i xlo = _mm512_broadcast_i32x4(load128(reinterpret_cast<const uint8_t*>(xb.qs)));
    const __m512i xhi = _mm512_broadcast_i32x4(load128(reinterpret_cast<const uint8_t*>(xb.qs + 16)));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const size_t q = off + offsetof(Block, qs);
    __m512i p[4];
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
      const __m512i w = rows4(rp, m, q);
      const __m512i lo = Derived::map(_mm512_and_si512(w, m4));
      const __m512i hi = Derived::map(_mm512_and_si512(_mm512_srli_epi16(w, 4), m4));
      p[m] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xlo), hi, xhi);
    }
    return reduce4(p);
  }
};

struct GQ4_0 : Nibbles<GQ4_0, BlockQ4_0> {
  static constexpr int kOffset = 8;  // value = nibble − 8
  static __m512i map(__m512i nib) { return nib; }
  static __m512 scales(__m512i h) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)); }
};

struct GMxfp4 : Nibbles<GMxfp4, BlockMxfp4> {
  static constexpr int kOffset = 12;  // doubled E2M1 + 12, scale 2^(e−128)
  static __m512i map(__m512i nib) {
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    return _mm512_shuffle_epi8(lut, nib);
  }
  static __m512 scales(__m512i e) { return e8m0_half16(_mm512_and_si512(e, _mm512_set1_epi32(0xff))); }
};

// Per activation block of a segment: its scale and −kOffset·Σx (the panel's Side).
struct Side {
  float xd[kSeg];
  int32_t c[kSeg];
};

// Σ of a Q8_0 block's 32 quants.
inline int32_t block_sum(const BlockQ8_0& b) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  return hsum_i32x8(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), v));
}

// One group of rows (rp: 16 row pointers at the segment's first block, rows past the group
// repeating its last; rows: their offsets from rp[0], for the gather of the rows' block scales) over
// the segment's nb blocks; y[l] (+)= lane l under mask m. Every other block prefetches the 16 rows
// kPrefetch blocks ahead, running on into the next group's rows at the end.
template <class G>
void group(const uint8_t* const* rp, __m512i rows, size_t ws, int nb, const BlockQ8_0* x, const Side& s,
           float* y, __mmask16 m, bool first) {
  using Block = typename G::Block;
  constexpr int kPrefetch = 32;
  constexpr size_t B = sizeof(Block);
  __m512 acc = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, y);
  for (int k = 0; k < nb; ++k) {
    if (k % 2 == 0) {
      const int kp = k + kPrefetch;
      const size_t pf = kp < nb ? kp * B : kRows * ws + (kp - nb) * B;
#pragma GCC unroll 16
      for (int l = 0; l < kRows; ++l) _mm_prefetch(reinterpret_cast<const char*>(rp[l] + pf), _MM_HINT_T0);
    }
    const __m512i isum = _mm512_add_epi32(G::dots(rp, k * B, x[k]), _mm512_set1_epi32(s.c[k]));
    const __m512 dw = G::scales(_mm512_i32gather_epi32(rows, rp[0] + k * B, 1));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(s.xd[k])), acc);
  }
  _mm512_mask_storeu_ps(y, m, acc);
}

template <class G>
void gemv_q32(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  using Block = typename G::Block;
  STRATA_ASSERT(ws < (size_t{1} << 31) / kRows);  // the gather's int32 row offsets
  const int64_t nb = n / 32;
  const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x);
  alignas(64) Side side;
  for (int64_t k0 = 0; k0 < nb; k0 += kSeg) {
    const int seg = static_cast<int>(std::min<int64_t>(kSeg, nb - k0));
    for (int k = 0; k < seg; ++k) {
      side.xd[k] = h2f(xb[k0 + k].d);
      side.c[k] = -G::kOffset * block_sum(xb[k0 + k]);
    }
    const size_t off = static_cast<size_t>(k0) * sizeof(Block);
    for (int64_t r0 = 0; r0 < nr; r0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, nr - r0));
      const uint8_t* rp[kRows];
      for (int l = 0; l < kRows; ++l)
        rp[l] = at(w, static_cast<size_t>(r0 + std::min(l, rows - 1)) * ws + off);
      const __mmask16 m = static_cast<__mmask16>((1u << rows) - 1);
      const __m512i ro = _mm512_mullo_epi32(
          _mm512_min_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(rows - 1)),
          _mm512_set1_epi32(static_cast<int32_t>(ws)));
      group<G>(rp, ro, ws, seg, xb + k0, side, y + r0, m, k0 == 0);
    }
  }
}

}  // namespace

void gemv_q8_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  gemv_q32<GQ8_0>(n, w, ws, nr, x, y);
}
void gemv_q4_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  gemv_q32<GQ4_0>(n, w, ws, nr, x, y);
}
void gemv_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  gemv_q32<GMxfp4>(n, w, ws, nr, x, y);
}

}  // namespace strata::x86::avx512
