// AVX2 attention products over block-type KV rows (q8_0, q4_0, iq4_nl), read in place, with the
// numerics kernels/ops.h states for them (bit-identical to kernels/kv_row_ops.cpp):
// - q·k: the query quantized to Q8_0 once per call; eight keys per pass, each block's 32 values
//   multiplied as bytes (maddubs: Q4_0's unsigned nibbles directly, the 8·Σq offset taken off
//   after; Q8_0 / IQ4_NL grid values through the sign trick), the eight keys' int32 sums reduced
//   side by side, then sum += float(Σ)·(d_k·d_q) in the eight keys' f32 lanes, blocks in order;
// - Σ p·v: per 32 outputs, each key's block as int8 → f32 and one fma by s_j·d.
// -ffp-contract=off (the mul / add pairs of q·k are the reference's two roundings).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/avx2_util.h"
#include "quant/quant_ref.h"

namespace strata::x86::avx2 {
namespace {

inline uint16_t u16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline __m256i iq4nl_table() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
}

// A block type: its bytes, its 32 values as int8 in element order (ints), their products with
// the query block q summed per 4 (prod; the true Σ is the lanes' total minus kBias·Σq).
struct Q8 {
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static constexpr int kBias = 0;
  __m256i ints(const uint8_t* b) const { return load32(b + 2); }
  __m256i prod(const uint8_t* b, __m256i q) const { return dot_i8x32(load32(b + 2), q); }
};

struct Q4 {
  static constexpr size_t kBytes = sizeof(BlockQ4_0);
  static constexpr int kBias = 8;
  __m256i ints(const uint8_t* b) const {
    return _mm256_sub_epi8(nibbles_32_bcast(b + 2), _mm256_set1_epi8(8));
  }
  __m256i prod(const uint8_t* b, __m256i q) const {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(nibbles_32_bcast(b + 2), q), _mm256_set1_epi16(1));
  }
};

struct IQ4 {
  static constexpr size_t kBytes = sizeof(BlockIq4Nl);
  static constexpr int kBias = 0;
  __m256i table = iq4nl_table();
  __m256i ints(const uint8_t* b) const { return _mm256_shuffle_epi8(table, nibbles_32_bcast(b + 2)); }
  __m256i prod(const uint8_t* b, __m256i q) const { return dot_i8x32(ints(b), q); }
};

template <class T>
void dot_rows(const float* q, const void* const* k, int64_t nk, int64_t n, float* out) {
  const T t{};
  const int64_t nb = n / QK8_0;
  BlockQ8_0 qq[kKvRowMaxWidth / QK8_0];
  avx2::from_float_q8_0(q, qq, n);
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
      for (int c = 0; c < 8; ++c) p[c] = t.prod(r[c] + o, qv);
      __m256i isum = hsum_i32x8x8(p);
      if (T::kBias) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(bias[b]));
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

// 32 outputs (one block column) stay in registers across all keys.
template <class T>
void add_scaled_rows(float* y, const void* const* x, const float* s, int64_t nk, int64_t n) {
  const T t{};
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    float* yb = y + b * QK8_0;
    const size_t o = static_cast<size_t>(b) * T::kBytes;
    __m256 y0 = _mm256_loadu_ps(yb), y1 = _mm256_loadu_ps(yb + 8);
    __m256 y2 = _mm256_loadu_ps(yb + 16), y3 = _mm256_loadu_ps(yb + 24);
    for (int64_t j = 0; j < nk; ++j) {
      const uint8_t* blk = static_cast<const uint8_t*>(x[j]) + o;
      const __m256 c = _mm256_set1_ps(s[j] * h2f(u16_at(blk)));
      const __m256i v = t.ints(blk);
      const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
      y0 = _mm256_fmadd_ps(c, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), y0);
      y1 = _mm256_fmadd_ps(c, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), y1);
      y2 = _mm256_fmadd_ps(c, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), y2);
      y3 = _mm256_fmadd_ps(c, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), y3);
    }
    _mm256_storeu_ps(yb, y0);
    _mm256_storeu_ps(yb + 8, y1);
    _mm256_storeu_ps(yb + 16, y2);
    _mm256_storeu_ps(yb + 24, y3);
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

}  // namespace strata::x86::avx2
