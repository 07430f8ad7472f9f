// AVX2 one-token products (decode) for CPUs without AVX-512: y[r] = W_r · x, rows in groups of 4
// that share every activation load (and the per-block activation work: Q8_0 x, its offset
// correction, its scale), each group prefetching the rows two groups below (decode streams the
// weights from DRAM or L3; as avx512_gemv.cpp).
//
// 32-element block types against Q8_0 activations, per row and block: the int8 products through
// VPMADDUBSW (unsigned × signed, pair sums in int16) and VPMADDWD into 8 int32 lanes, reduced to the
// block's exact integer dot and scaled by dw·dx into the row's f32 sum (the panel's bits):
//   Q4_0 nibbles in element order from one 16-byte broadcast, a VPSRLVD by 0 / 4 per half and an
//     AND (a dword shift pulls the next byte's bits into the top nibble only, which the AND drops);
//     they meet x unsigned, the offset 8·(x pair sums), shared by the 4 rows, is subtracted in int16;
//   MXFP4 the same nibbles LUT-decoded to 2·E2M1 + 12 ∈ [0, 24], offset 12;
//   Q8_0 |w| against sign(x, w) (avx2_util.h's dot_i8x32 PRECOND: no activation byte is −128).
// F16 / BF16: x widened to f32 once per segment, weights widened 8 at a time (F16C / a 16-bit
// shift), FMA per row; the n % 8 tail in scalar f32.
// Each equals vec_dot per row up to f32 summation order.
#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx2 {
namespace {

constexpr int kRows = 4;
constexpr int kPrefetchGroups = 2;

inline const uint8_t* at(const void* p, size_t off) {
  return static_cast<const uint8_t*>(p) + off;
}
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline void prefetch(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}

// 16 packed bytes → 32 nibbles (low nibbles, then high) as unsigned bytes.
inline __m256i nibbles(const uint8_t* p) {
  const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_and_si256(_mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                          _mm256_set1_epi8(0x0f));
}

// The fp16 at byte offset off of 4 blocks → 4 f32 lanes.
inline __m128 f16_x4(const uint8_t* const (&b)[4], size_t off) {
  uint64_t bits = 0;
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    uint16_t h;
    __builtin_memcpy(&h, b[r] + off, 2);
    bits |= static_cast<uint64_t>(h) << (16 * r);
  }
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
}

// Weight decoders: pairs(block, x, corr) = the 16 int16 pair sums of the block with x (exact),
// corr(x) the per-block activation term they need, scales(b) the weight scales of 4 blocks.
struct DecQ8_0 {
  using Block = BlockQ8_0;
  static __m256i corr(__m256i) { return _mm256_setzero_si256(); }
  static __m256i pairs(const Block& b, __m256i x, __m256i) {
    const __m256i w = load256(b.qs);
    return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  }
  static __m128 scales(const uint8_t* const (&b)[4]) { return f16_x4(b, 0); }
};
struct DecQ4_0 {
  using Block = BlockQ4_0;
  static __m256i corr(__m256i x) { return _mm256_maddubs_epi16(_mm256_set1_epi8(8), x); }
  static __m256i pairs(const Block& b, __m256i x, __m256i corr) {
    return _mm256_sub_epi16(_mm256_maddubs_epi16(nibbles(b.qs), x), corr);
  }
  static __m128 scales(const uint8_t* const (&b)[4]) { return f16_x4(b, 0); }
};
struct DecMxfp4 {
  using Block = BlockMxfp4;
  static __m256i corr(__m256i x) { return _mm256_maddubs_epi16(_mm256_set1_epi8(12), x); }
  static __m256i pairs(const Block& b, __m256i x, __m256i corr) {
    const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0, 12, 13,
                                         14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    return _mm256_sub_epi16(_mm256_maddubs_epi16(_mm256_shuffle_epi8(lut, nibbles(b.qs)), x), corr);
  }
  // 2^(e−128) as float bits (quant/fp8_fp4's e8m0_to_f32_half): (e − 1) << 23, or the subnormal
  // 0x00200000 << e for e < 2.
  static __m128 scales(const uint8_t* const (&b)[4]) {
    const __m128i e = _mm_setr_epi32(b[0][0], b[1][0], b[2][0], b[3][0]);
    const __m128i normal = _mm_slli_epi32(_mm_sub_epi32(e, _mm_set1_epi32(1)), 23);
    const __m128i sub = _mm_sllv_epi32(_mm_set1_epi32(0x00200000), e);
    return _mm_castsi128_ps(_mm_blendv_epi8(normal, sub, _mm_cmplt_epi32(e, _mm_set1_epi32(2))));
  }
};

// R rows (w: row 0, ws apart) over blocks [0, nb): y[r] = results. Per block the R rows' scales
// are converted together (times dx), and each row's exact integer dot is reduced before it is
// scaled: acc_r = fma(isum_r, dw_r·dx, acc_r) block after block, the panel's arithmetic
// (avx2_gemm_panel.cpp), so decode and a batch give every output the same bits. The 4 rows'
// reductions share one HADD tree and their accumulators one register.
template <class Dec, int R>
void rows_q32(int64_t nb, const uint8_t* w, size_t ws, const BlockQ8_0* x, float* y) {
  using Block = typename Dec::Block;
  const __m256i ones = _mm256_set1_epi16(1);
  const size_t pf = static_cast<size_t>(kPrefetchGroups * kRows) * ws;
  __m128 acc = _mm_setzero_ps();
  auto block = [&](int64_t i, bool fetch) {
    const __m256i xv = load256(x[i].qs);
    const __m256i corr = Dec::corr(xv);
    const uint8_t* b[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
      b[r] = w + static_cast<size_t>(r < R ? r : 0) * ws + static_cast<size_t>(i) * sizeof(Block);
    const __m128 sc = _mm_mul_ps(Dec::scales(b), _mm_set1_ps(h2f(x[i].d)));
    __m256i p[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      if (r >= R) {
        p[r] = _mm256_setzero_si256();
        continue;
      }
      if (fetch) prefetch(b[r] + pf);
      p[r] = _mm256_madd_epi16(Dec::pairs(*reinterpret_cast<const Block*>(b[r]), xv, corr), ones);
    }
    // Lane r of the sum = Σ of p[r]'s 8 lanes (exact in int32).
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), sc, acc);
  };
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {  // 2 blocks < 64 bytes: one prefetch per pair reaches every line
    block(i, true);
    block(i + 1, false);
  }
  if (i < nb) block(i, true);
  alignas(16) float out[4];
  _mm_store_ps(out, acc);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[r] = out[r];
}

template <class Dec>
void gemv_q32(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  const int64_t nb = n / 32;
  const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x);
  int64_t r = 0;
  for (; r + kRows <= nr; r += kRows)
    rows_q32<Dec, kRows>(nb, at(w, static_cast<size_t>(r) * ws), ws, xb, y + r);
  for (; r < nr; ++r) rows_q32<Dec, 1>(nb, at(w, static_cast<size_t>(r) * ws), ws, xb, y + r);
}

// ---- F16 / BF16: x in f32 per segment ----

constexpr int64_t kFloatSeg = 2048;  // f32 activations held per segment (8 KiB)

struct WidenF16 {
  static __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float one(uint16_t h) { return h2f(h); }
};
struct WidenBf16 {
  static __m256 load8(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static float one(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
  }
};

// R rows from element k0 of each (w: row 0 at that element), len elements against xf; y[r] =
// or += the result.
template <class Widen, int R>
void rows_float(const float* xf, int64_t len, const uint16_t* w, size_t ws, float* y, bool add) {
  const uint16_t* wr[R];
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    wr[r] = reinterpret_cast<const uint16_t*>(at(w, static_cast<size_t>(r) * ws));
    acc[r] = _mm256_setzero_ps();
  }
  const size_t pf = static_cast<size_t>(kPrefetchGroups * kRows) * ws;
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const __m256 xv = _mm256_load_ps(xf + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      if ((i & 31) == 0) prefetch(at(wr[r] + i, pf));
      acc[r] = _mm256_fmadd_ps(Widen::load8(wr[r] + i), xv, acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float s = hsum_f32x8(acc[r]);
    for (int64_t j = i; j < len; ++j) s += Widen::one(wr[r][j]) * xf[j];
    y[r] = add ? y[r] + s : s;
  }
}

template <class Widen>
void gemv_float(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  alignas(32) float xf[kFloatSeg];
  const uint16_t* xh = static_cast<const uint16_t*>(x);
  for (int64_t k0 = 0; k0 < n; k0 += kFloatSeg) {
    const int64_t len = std::min(kFloatSeg, n - k0);
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) _mm256_store_ps(xf + i, Widen::load8(xh + k0 + i));
    for (; i < len; ++i) xf[i] = Widen::one(xh[k0 + i]);
    const uint16_t* w0 = static_cast<const uint16_t*>(w) + k0;
    const bool add = k0 > 0;
    int64_t r = 0;
    for (; r + kRows <= nr; r += kRows)
      rows_float<Widen, kRows>(
          xf, len, reinterpret_cast<const uint16_t*>(at(w0, static_cast<size_t>(r) * ws)), ws, y + r, add);
    for (; r < nr; ++r)
      rows_float<Widen, 1>(xf, len, reinterpret_cast<const uint16_t*>(at(w0, static_cast<size_t>(r) * ws)),
                           ws, y + r, add);
  }
}

}  // namespace

void gemv_q8_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  gemv_q32<DecQ8_0>(n, w, ws, nr, x, y);
}
void gemv_q4_0_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  gemv_q32<DecQ4_0>(n, w, ws, nr, x, y);
}
void gemv_mxfp4_q8_0(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  gemv_q32<DecMxfp4>(n, w, ws, nr, x, y);
}
void gemv_f16(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  gemv_float<WidenF16>(n, w, ws, nr, x, y);
}
void gemv_bf16(int64_t n, const void* w, size_t ws, int64_t nr, const void* x, float* y) {
  gemv_float<WidenBf16>(n, w, ws, nr, x, y);
}

}  // namespace strata::x86::avx2
