// AVX-512 attention products over block-type KV rows (q8_0, q4_0, iq4_nl), read in place, with
// the numerics kernels/ops.h states for them (bit-identical to kernels/kv_row_ops.cpp):
// - q·k: the query quantized to Q8_0 once per call; eight keys per pass, each block's 32 values
//   taken as unsigned bytes (Q8_0 + 128, Q4_0's nibbles, IQ4_NL's grid + 128) against the signed
//   query bytes by VNNI (vpdpbusd: exact, no saturation), the offset times Σq taken off after the
//   eight keys' sums are reduced side by side, then sum += float(Σ)·(d_k·d_q) in the eight keys'
//   f32 lanes, blocks in order;
// - Σ p·v: per 32 outputs, each key's block as int8 → f32 (16 lanes) and one fma by s_j·d.
// -ffp-contract=off (the mul / add pairs of q·k are the reference's two roundings).
// GCC 12's AVX-512 conversion intrinsics (the 256 → 512 widenings) trip maybe-uninitialized once
// inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx512 {
namespace {

inline uint16_t u16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

inline __m128i load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// A block type: its bytes; its values 0..15 and 16..31 as int8 (lo16 / hi16, for Σ p·v); its
// 32 values plus kBias as unsigned bytes in element order (u8, for VNNI against the query).
struct Q8 {
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static constexpr int kBias = 128;
  __m128i lo16(const uint8_t* b) const { return load16(b + 2); }
  __m128i hi16(const uint8_t* b) const { return load16(b + 18); }
  __m256i u8(const uint8_t* b) const {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)),
                            _mm256_set1_epi8(-128));
  }
};

// Q4_0 and IQ4_NL: values through a 16-entry int8 table of the nibbles (Q4_0's: nibble − 8).
inline __m128i lo16_of(__m128i table, const uint8_t* b) {
  return _mm_shuffle_epi8(table, _mm_and_si128(load16(b + 2), _mm_set1_epi8(0x0f)));
}
inline __m128i hi16_of(__m128i table, const uint8_t* b) {
  return _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(load16(b + 2), 4), _mm_set1_epi8(0x0f)));
}

struct Q4 {
  static constexpr size_t kBytes = sizeof(BlockQ4_0);
  static constexpr int kBias = 8;
  __m128i table = _mm_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  __m128i lo16(const uint8_t* b) const { return lo16_of(table, b); }
  __m128i hi16(const uint8_t* b) const { return hi16_of(table, b); }
  __m256i u8(const uint8_t* b) const { return nibbles_32_bcast(b + 2); }
};

struct IQ4 {
  static constexpr size_t kBytes = sizeof(BlockIq4Nl);
  static constexpr int kBias = 128;
  __m128i table = load16(reinterpret_cast<const uint8_t*>(kIq4NlValues));
  __m256i table_u = _mm256_xor_si256(_mm256_broadcastsi128_si256(table), _mm256_set1_epi8(-128));
  __m128i lo16(const uint8_t* b) const { return lo16_of(table, b); }
  __m128i hi16(const uint8_t* b) const { return hi16_of(table, b); }
  __m256i u8(const uint8_t* b) const { return _mm256_shuffle_epi8(table_u, nibbles_32_bcast(b + 2)); }
};

template <class T>
void dot_rows(const float* q, const void* const* k, int64_t nk, int64_t n, float* out) {
  const T t{};
  const int64_t nb = n / QK8_0;
  BlockQ8_0 qq[kKvRowMaxWidth / QK8_0];
  avx512::from_float_q8_0(q, qq, n);
  float dq[kKvRowMaxWidth / QK8_0];
  int32_t bias[kKvRowMaxWidth / QK8_0];
  for (int64_t b = 0; b < nb; ++b) {
    dq[b] = h2f(qq[b].d);
    int32_t s = 0;
    for (int i = 0; i < QK8_0; ++i) s += qq[b].qs[i];
    bias[b] = T::kBias * s;
  }
  for (int64_t j = 0; j < nk; j += 8) {
    const uint8_t* r[8];
    for (int c = 0; c < 8; ++c) r[c] = static_cast<const uint8_t*>(k[std::min(j + c, nk - 1)]);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const size_t o = static_cast<size_t>(b) * T::kBytes;
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qq[b].qs));
      __m256i p[8];
      for (int c = 0; c < 8; ++c) p[c] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), t.u8(r[c] + o), qv);
      const __m256i isum = _mm256_sub_epi32(hsum_i32x8x8(p), _mm256_set1_epi32(bias[b]));
      const __m128i dk =
          _mm_setr_epi16(static_cast<int16_t>(u16_at(r[0] + o)), static_cast<int16_t>(u16_at(r[1] + o)),
                         static_cast<int16_t>(u16_at(r[2] + o)), static_cast<int16_t>(u16_at(r[3] + o)),
                         static_cast<int16_t>(u16_at(r[4] + o)), static_cast<int16_t>(u16_at(r[5] + o)),
                         static_cast<int16_t>(u16_at(r[6] + o)), static_cast<int16_t>(u16_at(r[7] + o)));
      const __m256 sc = _mm256_mul_ps(_mm256_cvtph_ps(dk), _mm256_set1_ps(dq[b]));
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), sc));
    }
    alignas(32) float a[8];
    _mm256_store_ps(a, acc);
    for (int c = 0; c < 8 && j + c < nk; ++c) out[j + c] = a[c];
  }
}

// 32 outputs (one block column) in two registers across all keys.
template <class T>
void add_scaled_rows(float* y, const void* const* x, const float* s, int64_t nk, int64_t n) {
  const T t{};
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    float* yb = y + b * QK8_0;
    const size_t o = static_cast<size_t>(b) * T::kBytes;
    __m512 y0 = _mm512_loadu_ps(yb), y1 = _mm512_loadu_ps(yb + 16);
    for (int64_t j = 0; j < nk; ++j) {
      const uint8_t* blk = static_cast<const uint8_t*>(x[j]) + o;
      const __m512 c = _mm512_set1_ps(s[j] * h2f(u16_at(blk)));
      y0 = _mm512_fmadd_ps(c, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(t.lo16(blk))), y0);
      y1 = _mm512_fmadd_ps(c, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(t.hi16(blk))), y1);
    }
    _mm512_storeu_ps(yb, y0);
    _mm512_storeu_ps(yb + 16, y1);
  }
}

template <class T>
KvRowOps ops() {
  return KvRowOps{dot_rows<T>, add_scaled_rows<T>};
}

}  // namespace

void fill_kv_quant_ops(OpsTable* t) {
  t->kv_q8_0 = ops<Q8>();
  t->kv_q4_0 = ops<Q4>();
  t->kv_iq4_nl = ops<IQ4>();
}

}  // namespace strata::x86::avx512
