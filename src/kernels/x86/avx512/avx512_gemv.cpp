// AVX-512 one-token products (decode): y[r] = W_r · x for a run of rows, x converted once per
// call into the form the inner loop wants and then held in L1 while every row streams past.
//
// Q4_0 / Q8_0 read weight rows as raw 64-byte chunks, scales included, with no shuffles: blocks
// are 18 / 34 bytes, an even size, so every 4-byte VPDPBUSD group holds bytes of one block only
// (two quant bytes at least, the rest its own or the next block's scale bytes). The activations
// are laid out to match (x at each quant byte's position, 0 at the scale bytes), and each int32
// lane is scaled by its block's weight scale, fetched from the raw bytes by one VPERMT2W over
// the previous and the current chunk, and by its activation scale. Unsigned × signed bytes:
//   Q4_0: nibbles 0..15 against signed x, each lane seeded with −8·Σx of its group;
//   Q8_0: w ^ 0x80 = w + 128 against signed x, seeded with −128·Σx.
// MXFP4 (17-byte blocks: groups would straddle) loads four blocks' quant bytes per register, see
// below. BF16 uses VDPBF16PS; F16 is avx512_gemv_f16.cpp.
// Each equals vec_dot per row up to f32 summation order.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}
inline __m512i load512(const void* p) {
  return _mm512_loadu_si512(p);
}

// Each row group prefetches, as it goes, the same bytes of the rows kPrefetchGroups groups below
// (decode streams weights from DRAM; the hardware prefetchers alone left the kernels waiting:
// 65536-row products 8–9 → 13–21 GB/s per thread). Prefetches past the matrix do not fault.
constexpr int kPrefetchGroups = 2;
inline void prefetch(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}

// ---- raw-chunk kernels (Q4_0, Q8_0) ----

// Layout constants of a raw type: block bytes kB (scale first, 2 bytes), a period of 32 blocks
// = kB / 2 chunks of 64 bytes, after which lane → block maps repeat. Segments of kSeg blocks
// (a multiple of 32) bound the per-call activation buffers.
template <int B, int Seg>
struct RawLayout {
  static constexpr int kB = B;
  static constexpr int kPeriod = B / 2;  // chunks per 32 blocks
  static constexpr int kSeg = Seg;
  static constexpr int kMaxChunks = Seg * B / 64;
  static_assert(Seg % 32 == 0 && (Seg * B) % 64 == 0, "segments hold whole periods");

  // Per chunk position within a period: the block of each int32 lane (relative to the period's
  // first block) and the VPERMT2W word index of that block's scale in [previous chunk | chunk].
  struct Tables {
    alignas(64) int32_t block[kPeriod][16];
    alignas(64) int16_t idx[kPeriod][32];
  };
  static const Tables& tables() {
    static const Tables t = [] {
      Tables r{};
      for (int c = 0; c < kPeriod; ++c) {
        for (int g = 0; g < 16; ++g) {
          const int k = (64 * c + 4 * g) / B;  // a group's bytes belong to this block (B even)
          r.block[c][g] = k;
          r.idx[c][g] = static_cast<int16_t>((B * k - 64 * c) / 2 + 32);
        }
      }
      return r;
    }();
    return t;
  }
};

using LayoutQ4_0 = RawLayout<18, 128>;
using LayoutQ8_0 = RawLayout<34, 64>;

// The activations of one segment in raw weight layout. Q4_0: a = x of the low nibbles, b = x of
// the high nibbles; Q8_0: a = x (b unused). corr: the per-lane seed; dx: the activation scale of
// each lane's block (0 past the row's end); idx: the scale word per lane (past the end: word 31 of
// the chunk, which the masked tail load zeroes).
template <class L>
struct RawActs {
  alignas(64) int8_t a[L::kMaxChunks * 64];
  alignas(64) int8_t b[L::kMaxChunks * 64];
  alignas(64) int32_t corr[L::kMaxChunks][16];
  alignas(64) float dx[L::kMaxChunks][16];
  alignas(64) int16_t idx[L::kMaxChunks][32];
  int chunks = 0;
  __mmask64 tail = 0;  // bytes of the last chunk inside the row
};

// Fill xa for blocks [0, nb) of x (nb <= kSeg). two_halves: Q4_0 (x[0..15] to a, x[16..31] to b).
template <class L, bool kTwoHalves>
void prepare_raw(const BlockQ8_0* x, int nb, RawActs<L>& xa) {
  constexpr int B = L::kB;
  const int row = B * nb;
  const int chunks = (row + 63) / 64;
  xa.chunks = chunks;
  const int tail_bytes = row - 64 * (chunks - 1);
  xa.tail = tail_bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << tail_bytes) - 1;
  std::memset(xa.a, 0, static_cast<size_t>(chunks) * 64);
  if (kTwoHalves) std::memset(xa.b, 0, static_cast<size_t>(chunks) * 64);
  alignas(64) float dxs[L::kSeg + 32];
  for (int k = 0; k < nb; ++k) {
    dxs[k] = h2f(x[k].d);
    if (kTwoHalves) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xa.a + B * k + 2),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[k].qs)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xa.b + B * k + 2),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[k].qs + 16)));
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xa.a + B * k + 2),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[k].qs)));
    }
  }
  for (int k = nb; k < (nb + 31) / 32 * 32 + 32; ++k) dxs[k] = 0.0f;
  const typename L::Tables& t = L::tables();
  const __m512i off = _mm512_set1_epi8(static_cast<char>(kTwoHalves ? 8 : 0x80));
  const __m512i z = _mm512_setzero_si512();
  for (int c = 0; c < chunks; ++c) {
    const int q = c / L::kPeriod, cp = c % L::kPeriod;
    __m512i s = _mm512_dpbusd_epi32(z, off, load512(xa.a + 64 * c));
    if (kTwoHalves) s = _mm512_dpbusd_epi32(s, off, load512(xa.b + 64 * c));
    _mm512_store_si512(xa.corr[c], _mm512_sub_epi32(z, s));
    const __m512i kl = _mm512_load_si512(t.block[cp]);
    const float* d0 = dxs + 32 * q;
    __m512 dx = _mm512_permutex2var_ps(_mm512_load_ps(d0), kl, _mm512_load_ps(d0 + 16));
    __m512i idx = _mm512_load_si512(t.idx[cp]);
    if (c == chunks - 1) {
      const __mmask16 past =
          _mm512_cmpge_epi32_mask(_mm512_add_epi32(kl, _mm512_set1_epi32(32 * q)), _mm512_set1_epi32(nb));
      dx = _mm512_mask_mov_ps(dx, past, _mm512_setzero_ps());
      idx = _mm512_mask_mov_epi16(idx, static_cast<__mmask32>(past), _mm512_set1_epi16(63));
    }
    _mm512_store_ps(xa.dx[c], dx);
    _mm512_store_si512(xa.idx[c], idx);
  }
}

// One chunk of one row: raw weight bytes (prev: the row's previous chunk) into acc.
template <bool kQ4>
inline void raw_step(__m512i raw, __m512i& prev, __m512& acc, __m512i xa, __m512i xb, __m512i corr, __m512 dx,
                     __m512i idx) {
  __m512i p;
  if (kQ4) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    p = _mm512_dpbusd_epi32(corr, _mm512_and_si512(raw, m4), xa);
    p = _mm512_dpbusd_epi32(p, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4), xb);
  } else {
    p = _mm512_dpbusd_epi32(corr, _mm512_xor_si512(raw, _mm512_set1_epi8(static_cast<char>(0x80))), xa);
  }
  const __m512i dh = _mm512_permutex2var_epi16(prev, idx, raw);
  const __m512 s = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(dh)), dx);
  acc = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(p), acc);
  prev = raw;
}

// R rows (w: the segment's start in row 0) against the prepared segment; y[r] = or += result.
template <class L, bool kQ4, int R>
void raw_rows(const RawActs<L>& xa, const uint8_t* w, size_t ws, float* y, bool add) {
  __m512 acc[R];
  __m512i prev[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps(), prev[r] = _mm512_setzero_si512();
  const int last = xa.chunks - 1;
  for (int c = 0; c < last; ++c) {
    const __m512i a = _mm512_load_si512(xa.a + 64 * c);
    const __m512i b = kQ4 ? _mm512_load_si512(xa.b + 64 * c) : a;
    const __m512i corr = _mm512_load_si512(xa.corr[c]);
    const __m512 dx = _mm512_load_ps(xa.dx[c]);
    const __m512i idx = _mm512_load_si512(xa.idx[c]);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      prefetch(w + static_cast<size_t>(r + kPrefetchGroups * R) * ws + 64 * c);
      raw_step<kQ4>(load512(w + static_cast<size_t>(r) * ws + 64 * c), prev[r], acc[r], a, b, corr, dx, idx);
    }
  }
  {
    const __m512i a = _mm512_load_si512(xa.a + 64 * last);
    const __m512i b = kQ4 ? _mm512_load_si512(xa.b + 64 * last) : a;
    const __m512i corr = _mm512_load_si512(xa.corr[last]);
    const __m512 dx = _mm512_load_ps(xa.dx[last]);
    const __m512i idx = _mm512_load_si512(xa.idx[last]);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i raw = _mm512_maskz_loadu_epi8(xa.tail, w + static_cast<size_t>(r) * ws + 64 * last);
      raw_step<kQ4>(raw, prev[r], acc[r], a, b, corr, dx, idx);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const float v = _mm512_reduce_add_ps(acc[r]);
    y[r] = add ? y[r] + v : v;
  }
}

template <class L, bool kQ4>
void gemv_raw(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  constexpr int kR = 4;
  const int64_t nb = n / 32;
  const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x);
  RawActs<L> xa;
  for (int64_t k0 = 0; k0 < nb; k0 += L::kSeg) {
    const int seg = static_cast<int>(std::min<int64_t>(L::kSeg, nb - k0));
    prepare_raw<L, kQ4>(xb + k0, seg, xa);
    const uint8_t* w0 = at(w, static_cast<size_t>(k0) * L::kB);
    const bool add = k0 > 0;
    int64_t r = 0;
    for (; r + kR <= nr; r += kR) raw_rows<L, kQ4, kR>(xa, w0 + static_cast<size_t>(r) * ws, ws, y + r, add);
    for (; r < nr; ++r) raw_rows<L, kQ4, 1>(xa, w0 + static_cast<size_t>(r) * ws, ws, y + r, add);
  }
}

// ---- MXFP4: four blocks per register ----

// The quant bytes of blocks a, b, c, d load as the four 128-bit lanes of one register; its low
// nibbles and its high nibbles (LUT-decoded to u = 2·E2M1 + 12 ∈ [0, 24]) meet activations laid
// out the same way, so both products land in lanes [a×4 b×4 c×4 d×4] and one conversion, one
// VSCALEFPS by e − 128 (the block exponents, broadcast by VPSHUFB from the 17-byte stride: block
// j's exponent sits at byte j of lane j) and one FMA with the activation scales serve 4 blocks.
constexpr int kMxSegGroups = 32;  // 128 blocks per segment
struct MxActs {
  alignas(64) int8_t lo[kMxSegGroups][64];  // x 0..15 of each block
  alignas(64) int8_t hi[kMxSegGroups][64];  // x 16..31
  alignas(64) int32_t corr[kMxSegGroups][16];
  alignas(64) float dx[kMxSegGroups][16];
};

// Blocks [0, nb) of x, nb <= 4·kMxSegGroups; a last partial group is zero-padded.
void prepare_mx(const BlockQ8_0* x, int64_t nb, MxActs& xa) {
  const __m512i off = _mm512_set1_epi8(12);
  const __m512i z = _mm512_setzero_si512();
  for (int64_t g = 0; 4 * g < nb; ++g) {
    __m512i lo = z, hi = z;
    alignas(16) float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int j = 0; j < 4 && 4 * g + j < nb; ++j) {
      const BlockQ8_0& b = x[4 * g + j];
      lo = _mm512_mask_broadcast_i32x4(lo, static_cast<__mmask16>(0xFu << (4 * j)),
                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
      hi = _mm512_mask_broadcast_i32x4(hi, static_cast<__mmask16>(0xFu << (4 * j)),
                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)));
      d[j] = h2f(b.d);
    }
    _mm512_store_si512(xa.lo[g], lo);
    _mm512_store_si512(xa.hi[g], hi);
    const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, off, lo), off, hi);
    _mm512_store_si512(xa.corr[g], _mm512_sub_epi32(z, s));
    const __m512i four = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    _mm512_store_ps(xa.dx[g], _mm512_permutexvar_ps(four, _mm512_castps128_ps512(_mm_load_ps(d))));
  }
}

// One group of nv <= 4 blocks of one row (b: its first block) into acc.
inline void mx_step(const uint8_t* b, int nv, __m512& acc, __m512i xlo, __m512i xhi, __m512i corr,
                    __m512 dx) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i lut =
      _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
  // lane j: all bytes j (block j's exponent is byte 17·j = 16·j + j)
  const __m512i ectl =
      _mm512_setr_epi32(0, 0, 0, 0, 0x01010101, 0x01010101, 0x01010101, 0x01010101, 0x02020202, 0x02020202,
                        0x02020202, 0x02020202, 0x03030303, 0x03030303, 0x03030303, 0x03030303);
  constexpr uint64_t kEBytes = 1ull | 1ull << 17 | 1ull << 34 | 1ull << 51;
  __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 1)));
  __mmask64 em = 1;
  if (nv == 4) {
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 35)), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 52)), 3);
    em = kEBytes;
  } else {  // past nv: block a again, against zero activations
    for (int j = 1; j < nv; ++j)
      v = _mm512_mask_broadcast_i32x4(v, static_cast<__mmask16>(0xFu << (4 * j)),
                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 17 * j + 1)));
    em = kEBytes & ((1ull << (17 * (nv - 1) + 1)) - 1);
  }
  const __m512i ql = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
  const __m512i qh = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
  const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(corr, ql, xlo), qh, xhi);
  // e per lane as float bits 0x4B0000ee = 2^23 + e, minus 2^23 + 128: e − 128 exactly.
  const __m512i e = _mm512_shuffle_epi8(_mm512_maskz_loadu_epi8(em, b), ectl);
  const __m512i eb =
      _mm512_ternarylogic_epi32(e, _mm512_set1_epi32(0xff), _mm512_set1_epi32(0x4B000000), 0xEA);
  const __m512 ef = _mm512_sub_ps(_mm512_castsi512_ps(eb), _mm512_set1_ps(8388736.0f));
  acc = _mm512_fmadd_ps(_mm512_scalef_ps(_mm512_cvtepi32_ps(p), ef), dx, acc);
}

template <int R>
void mx_rows(const MxActs& xa, int64_t nb, const uint8_t* w, size_t ws, float* y, bool add) {
  __m512 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const int64_t full = nb / 4;
  for (int64_t g = 0; g < full; ++g) {
    const __m512i xlo = _mm512_load_si512(xa.lo[g]), xhi = _mm512_load_si512(xa.hi[g]);
    const __m512i corr = _mm512_load_si512(xa.corr[g]);
    const __m512 dx = _mm512_load_ps(xa.dx[g]);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      prefetch(w + static_cast<size_t>(r + kPrefetchGroups * R) * ws + 68 * g);
      mx_step(w + static_cast<size_t>(r) * ws + 68 * g, 4, acc[r], xlo, xhi, corr, dx);
    }
  }
  if (const int nv = static_cast<int>(nb - 4 * full); nv > 0) {
    const __m512i xlo = _mm512_load_si512(xa.lo[full]), xhi = _mm512_load_si512(xa.hi[full]);
    const __m512i corr = _mm512_load_si512(xa.corr[full]);
    const __m512 dx = _mm512_load_ps(xa.dx[full]);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      mx_step(w + static_cast<size_t>(r) * ws + 68 * full, nv, acc[r], xlo, xhi, corr, dx);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const float v = _mm512_reduce_add_ps(acc[r]);
    y[r] = add ? y[r] + v : v;
  }
}

// ---- BF16 ----
// The row loop, parameterised by the step: BF16 takes 32 weights per VDPBF16PS against the bf16
// activations as they come. (F16: avx512_gemv_f16.cpp.)

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

void gemv_q4_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  gemv_raw<LayoutQ4_0, true>(n, w, ws, nr, x, y);
}

void gemv_q8_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  gemv_raw<LayoutQ8_0, false>(n, w, ws, nr, x, y);
}

void gemv_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  constexpr int kR = 4;
  const int64_t nb = n / 32;
  const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x);
  MxActs xa;
  for (int64_t k0 = 0; k0 < nb; k0 += 4 * kMxSegGroups) {
    const int64_t seg = std::min<int64_t>(4 * kMxSegGroups, nb - k0);
    prepare_mx(xb + k0, seg, xa);
    const uint8_t* w0 = at(w, static_cast<size_t>(k0) * sizeof(BlockMxfp4));
    const bool add = k0 > 0;
    int64_t r = 0;
    for (; r + kR <= nr; r += kR) mx_rows<kR>(xa, seg, w0 + static_cast<size_t>(r) * ws, ws, y + r, add);
    for (; r < nr; ++r) mx_rows<1>(xa, seg, w0 + static_cast<size_t>(r) * ws, ws, y + r, add);
  }
}

void gemv_bf16(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  w16_gemv<StepBF16>(static_cast<const uint16_t*>(x), n, static_cast<const uint16_t*>(w), ws, nr, y, false);
}

}  // namespace strata::x86::avx512
