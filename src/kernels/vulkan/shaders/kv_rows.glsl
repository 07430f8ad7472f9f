// A cache's K and V rows as attn_rope.comp writes them and attention.comp reads them
// (kernels/kv_rows.h in GLSL). Included after the including shader declares S (s[], f32), KC
// (kc[]) and VC (vc[]) (uint words) and its push constants p with kc_off / vc_off, cap_k / cap_v,
// kt_off / vt_off, br_k / br_v and flags:
//   bit 0 / 1: K / V is a ring (slot j mod cap);
//   bits 2-4 / 5-7: the K / V rows' type (KV_* below; quant/'s layouts: blocks of 32 values with
//     an f16 scale then 32 int8 (q8_0, 34 bytes) or 16 bytes of nibbles (q4_0 / iq4_nl, 18
//     bytes); a UE8M0 scale byte then 32 E4M3 bytes (fp8_e4m3, 33 bytes) or 16 bytes of E2M1
//     nibbles (mxfp4, 17 bytes); byte i of a nibble block holds values i (low) and i + 16);
//   bit 8 / 9: K / V rows are paged: row j is slot tab[j / br]·br + j mod br, tab the block
//     table at S[kt_off..] / S[vt_off..] (int32 bits);
//   bit 10 / 11: K / V rows' head slices are stored Hadamard-rotated (kv_hadamard).
// Value e of the rows (e = slot·width + column) sits at word kc_off + e (f32), half kc_off + e
// (f16, bf16), in block e / 32 at half kc_off + (e / 32)·17 (q8_0) / ·9 (q4_0, iq4_nl), or at
// byte kc_off + (e / 32)·33 (fp8) / ·17 (mxfp4): kc_off / vc_off count the rows' units (words,
// halves or bytes; a KV pool's regions follow each other, so rows may start mid-word). Functions
// take v: false for K, true for V.

#define KV_F32 0u
#define KV_F16 1u
#define KV_Q8_0 2u
#define KV_Q4_0 3u
#define KV_IQ4_NL 4u
#define KV_BF16 5u
#define KV_FP8 6u
#define KV_MXFP4 7u

// quant/iq4_nl.cpp kIq4NlValues and quant/fp8_fp4.h kMxfp4Values2x (E2M1 values doubled).
const int kv_iq4nl_grid[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
const int kv_mxfp4_2x[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);

uint kv_type(bool v) {
  return (p.flags >> (v ? 5u : 2u)) & 7u;
}
uint kv_off(bool v) {
  return v ? p.vc_off : p.kc_off;
}
// Block types read as integers against a Q8_0 query (kernels/kv_row_ops.cpp's block path).
bool kv_int_blocks(uint t) {
  return t == KV_Q8_0 || t == KV_Q4_0 || t == KV_IQ4_NL;
}
// Rows addressed in bytes (fp8, mxfp4).
bool kv_byte_rows(uint t) {
  return t == KV_FP8 || t == KV_MXFP4;
}
// The units (halves or bytes) of one block of a block type.
uint kv_block_units(uint t) {
  return t == KV_Q8_0 ? 17u : t == KV_FP8 ? 33u : t == KV_MXFP4 ? 17u : 9u;
}

bool kv_rotated(bool v) {
  return (p.flags & (v ? 2048u : 1024u)) != 0u;
}

// kernels/kv_row_ops.cpp hadamard_rotate in place on S[a..a+n): blocks of b (the largest power
// of two dividing n, at most 256), each a Walsh-Hadamard transform in the CPU's butterfly order
// times 1 / sqrt(b).
void kv_hadamard(uint a, uint n) {
  uint b = 1u;
  while (b < 256u && n % (2u * b) == 0u) b *= 2u;
  if (b == 1u) return;
  const float norm = 1.0 / sqrt(float(b));
  for (uint o = a; o < a + n; o += b) {
    for (uint h = 1u; h < b; h *= 2u)
      for (uint i = 0u; i < b; i += 2u * h)
        for (uint j = o + i; j < o + i + h; ++j) {
          const float x = s[j], y = s[j + h];
          s[j] = x + y;
          s[j + h] = x - y;
        }
    for (uint i = 0u; i < b; ++i) s[o + i] *= norm;
  }
}

// The slot of row j.
uint kv_slot(bool v, uint j) {
  if ((p.flags & (v ? 2u : 1u)) != 0u) return j % (v ? p.cap_v : p.cap_k);
  if ((p.flags & (v ? 512u : 256u)) != 0u) {
    const uint br = v ? p.br_v : p.br_k;
    return floatBitsToUint(s[(v ? p.vt_off : p.kt_off) + j / br]) * br + j % br;
  }
  return j;
}

// 2^k as an f32 for k in -126..127 (exact).
float kv_pow2(int k) {
  return uintBitsToFloat(uint(k + 127) << 23);
}
// quant/fp8_fp4.cpp ue8m0_to_f32 (2^(b−127)) and e8m0_to_f32_half (2^(b−128)), exact.
float kv_ue8m0(uint b) {
  return b == 0u ? uintBitsToFloat(0x00400000u) : uintBitsToFloat(b << 23);
}
float kv_e8m0_half(uint b) {
  return b < 2u ? uintBitsToFloat(0x00200000u << b) : uintBitsToFloat((b - 1u) << 23);
}

#ifdef KV_READ
uint kv_word(bool v, uint i) {
  return v ? vc[i] : kc[i];
}
uint kv_half(bool v, uint h) {
  return (kv_word(v, h >> 1) >> ((h & 1u) << 4)) & 0xffffu;
}
uint kv_byte(bool v, uint b) {
  return (kv_word(v, b >> 2) >> ((b & 3u) << 3)) & 0xffu;
}
// quant/fp8_fp4.cpp e4m3_to_f32 (0x7f / 0xff: NaN).
float kv_e4m3(uint b) {
  const uint e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return uintBitsToFloat(0x7fc00000u);
  const float mag = e == 0u ? float(m) * (1.0 / 512.0) : float(8u + m) * kv_pow2(int(e) - 10);
  return (b & 0x80u) != 0u ? -mag : mag;
}
// Value e of rows read as f32 values (f32, f16, bf16, fp8, mxfp4): quant/'s to_float.
float kv_value(bool v, uint e) {
  const uint t = kv_type(v), off = kv_off(v);
  if (t == KV_F32) return uintBitsToFloat(kv_word(v, off + e));
  if (t == KV_F16) return unpackHalf2x16(kv_half(v, off + e)).x;
  if (t == KV_BF16) return uintBitsToFloat(kv_half(v, off + e) << 16);
  const uint b = off + (e / 32u) * kv_block_units(t), i = e % 32u;
  if (t == KV_FP8) return kv_e4m3(kv_byte(v, b + 1u + i)) * kv_ue8m0(kv_byte(v, b));
  const uint q = kv_byte(v, b + 1u + (i & 15u));
  return float(kv_mxfp4_2x[i < 16u ? q & 15u : q >> 4]) * kv_e8m0_half(kv_byte(v, b));
}
// The first half of the block of an integer block type that holds value e (e a multiple of 32).
uint kv_block(bool v, uint e) {
  return kv_off(v) + (e / 32u) * kv_block_units(kv_type(v));
}
float kv_scale(bool v, uint h) {
  return unpackHalf2x16(kv_half(v, h)).x;
}
// Value i (< 32) of the block at half h as an integer: q8_0's int8, q4_0's nibble − 8, iq4_nl's
// grid value (byte i holds values i and i + 16).
int kv_int(bool v, uint h, uint i) {
  const uint t = kv_type(v);
  if (t == KV_Q8_0) return bitfieldExtract(int(kv_half(v, h + 1u + i / 2u)), int((i & 1u) * 8u), 8);
  const uint b = i & 15u;
  const uint byte_ = (kv_half(v, h + 1u + b / 2u) >> ((b & 1u) * 8u)) & 0xffu;
  const uint nib = i < 16u ? byte_ & 15u : byte_ >> 4;
  return t == KV_Q4_0 ? int(nib) - 8 : kv_iq4nl_grid[nib];
}
#endif

#ifdef KV_WRITE
void kv_put_word(bool v, uint i, uint x) {
  if (v)
    vc[i] = x;
  else
    kc[i] = x;
}
// The bits `mask` of a word another invocation writes the other bits of.
void kv_put_masked(bool v, uint i, uint mask, uint x) {
  if (v) {
    atomicAnd(vc[i], ~mask);
    atomicOr(vc[i], x & mask);
  } else {
    atomicAnd(kc[i], ~mask);
    atomicOr(kc[i], x & mask);
  }
}

// quant/iq4_nl.cpp nearest_index: the grid index nearest to x (grid units), a tie to the lower.
uint kv_iq4nl_index(float x) {
  uint k = 0u;
  for (uint i = 0u; i < 15u; ++i) k += x > 0.5 * float(kv_iq4nl_grid[i] + kv_iq4nl_grid[i + 1u]) ? 1u : 0u;
  return k;
}

// quant/fp8_fp4.cpp f32_to_e4m3 of x already clamped to ±448: the nearest E4M3 value (ties to
// even; subnormals on the grid of 2^-9), NaN to 0x7f with x's sign.
uint kv_f32_to_e4m3(float x) {
  const uint sign = (floatBitsToUint(x) >> 24) & 0x80u;
  if (isnan(x)) return sign | 0x7fu;
  const float a = abs(x);
  float r;
  if (a < 0.015625) {
    r = roundEven(a * 512.0) * (1.0 / 512.0);
  } else {
    const int e = int((floatBitsToUint(a) >> 23) & 0xffu) - 126;  // a = f·2^e, f in [0.5, 1)
    r = min(roundEven(a * kv_pow2(4 - e)) * kv_pow2(e - 4), 448.0);
  }
  if (r < 0.015625) return sign | uint(r * 512.0);
  const uint bits = floatBitsToUint(r);
  return sign | ((((bits >> 23) & 0xffu) - 120u) << 3) | ((bits >> 20) & 7u);
}

// quant/mxfp4.cpp mxfp4_nearest: the E2M1 nibble whose value (times d) is nearest x; the first
// of equally near ones.
uint kv_mxfp4_nearest(float x, float d) {
  uint best = 0u;
  precise float best_err = abs(float(kv_mxfp4_2x[0]) * d - x);
  for (uint k = 1u; k < 16u; ++k) {
    precise float e = abs(float(kv_mxfp4_2x[k]) * d - x);
    if (e < best_err) {
      best = k;
      best_err = e;
    }
  }
  return best;
}

// floor(log2(a)) of a positive normal a as the CPU's log2f gives it (correctly rounded): the
// exponent e, or e + 1 where log2 rounds up to it, which happens for the k ≤ kmax(B) largest
// mantissas (k ulps below 2) with B the binade of the floats just below e + 1 (checked against
// glibc on every normal float).
int kv_floor_log2(float a) {
  const uint bits = floatBitsToUint(a);
  const int e = int((bits >> 23) & 0xffu) - 127, t = e + 1;
  const int b = t > 0 ? findMSB(t - 1) : findMSB(-t);
  const uint kmax[8] = uint[8](0u, 1u, 2u, 5u, 11u, 22u, 44u, 88u);
  return b >= 1 && 0x800000u - (bits & 0x7fffffu) <= kmax[b] ? t : e;
}

// quant/iq4_nl.cpp from_float's scale of the block S[x..x+32) (before its f16 rounding): of the
// candidate inverse scales (−127 + t) / max, t in [−7, 7], the least-squares scale of the one
// that explains most of Σ w·x² (w = x²).
float kv_iq4nl_scale(uint x, float amax, float mx) {
  if (!(amax > 0.0)) return 0.0;
  precise float best = -1.0, d = 0.0;
  for (int t = -7; t <= 7; ++t) {
    const float id = float(kv_iq4nl_grid[0] + t) / mx;
    precise float sumqx = 0.0, sumq2 = 0.0;
    for (uint j = 0u; j < 32u; ++j) {
      const float xj = s[x + j];
      const float g = float(kv_iq4nl_grid[kv_iq4nl_index(xj * id)]);
      precise float w = xj * xj;
      sumqx += w * xj * g;
      sumq2 += w * g * g;
    }
    precise float fit = sumqx * sumqx, bound = best * sumq2;
    if (sumq2 > 0.0 && fit > bound) {
      best = sumqx * sumqx / sumq2;
      d = sumqx / sumq2;
    }
  }
  return d;
}

// Unit k (a half, or a byte for fp8 / mxfp4) of what S[x..) becomes, converted as quant/'s
// from_float converts: f16 / bf16 rows: value k (packHalf2x16; base/fp16.h f32_to_bf16: round to
// nearest even, NaN quieted). A block made from S[x..x+32) with scale d, its reciprocal id and
// scale code c: q8_0 / q4_0 / iq4_nl: k = 0 the scale d as f16, else values 2(k−1), 2(k−1)+1
// (q8_0: q = round-half-even(x · id)) or bytes 2(k−1), 2(k−1)+1 (byte i holds values i and
// i + 16: q4_0 min(15, trunc(x · id + 8.5)), iq4_nl the grid index nearest x · id); fp8 /
// mxfp4: k = 0 the code c, else fp8's E4M3 value k − 1 of x · id, or mxfp4's byte of the
// nibbles of values k − 1 and k + 15 nearest x / d.
uint kv_new_unit(uint t, uint x, float d, float id, uint c, uint k) {
  if (t == KV_F16) return packHalf2x16(vec2(s[x + k], 0.0)) & 0xffffu;
  if (t == KV_BF16) {
    uint b = floatBitsToUint(s[x + k]);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (b >> 16) | 0x40u;
    b += 0x7fffu + ((b >> 16) & 1u);
    return b >> 16;
  }
  if (k == 0u) return kv_byte_rows(t) ? c : packHalf2x16(vec2(d, 0.0)) & 0xffffu;
  if (t == KV_FP8) return kv_f32_to_e4m3(clamp(s[x + k - 1u] * id, -448.0, 448.0));
  if (t == KV_MXFP4) return kv_mxfp4_nearest(s[x + k - 1u], d) | (kv_mxfp4_nearest(s[x + k + 15u], d) << 4);
  const uint i = 2u * (k - 1u);
  if (t == KV_Q8_0) {
    const int q0 = clamp(int(roundEven(s[x + i] * id)), -128, 127);
    const int q1 = clamp(int(roundEven(s[x + i + 1u] * id)), -128, 127);
    return (uint(q0) & 0xffu) | ((uint(q1) & 0xffu) << 8);
  }
  uint h = 0u;
  for (uint b = 0u; b < 2u; ++b) {
    const float x0 = s[x + i + b], x1 = s[x + i + b + 16u];
    uint q0, q1;
    if (t == KV_IQ4_NL) {
      q0 = kv_iq4nl_index(x0 * id);
      q1 = kv_iq4nl_index(x1 * id);
    } else {
      precise float f0 = x0 * id + 8.5;
      precise float f1 = x1 * id + 8.5;
      q0 = uint(min(int(f0), 15));
      q1 = uint(min(int(f1), 15));
    }
    h |= (q0 | (q1 << 4)) << (8u * b);
  }
  return h;
}

// Units [u, u + nu) of the rows from kv_new_unit (halves, or bytes for fp8 / mxfp4): whole words
// stored, a word shared with the neighbouring head or block (another invocation's) atomically.
void kv_put_units(bool v, uint t, uint u, uint nu, uint x, float d, float id, uint c) {
  const uint bits = kv_byte_rows(t) ? 8u : 16u, per = 32u / bits;
  for (uint w = u / per; w <= (u + nu - 1u) / per; ++w) {
    uint word = 0u, mask = 0u;
    for (uint j = max(u, per * w); j < min(u + nu, per * w + per); ++j) {
      const uint sh = bits * (j % per);
      word |= kv_new_unit(t, x, d, id, c, j - u) << sh;
      mask |= (bits == 8u ? 0xffu : 0xffffu) << sh;
    }
    if (mask == ~0u)
      kv_put_word(v, w, word);
    else
      kv_put_masked(v, w, mask, word);
  }
}

// The values S[a..a+n) into the rows from value e (n and e multiples of 32 for block types, even
// for f16 / bf16), converted as quant/'s from_float converts: q8_0 d = amax / 127; q4_0 d = max
// / −8 (max: the value of largest magnitude); iq4_nl kv_iq4nl_scale; fp8 the UE8M0 ceiling of
// max(amax, 1e-4) / 448; mxfp4 2^(floor(log2 amax) − 2) as its E8M0 code (0..254).
void kv_store(bool v, uint e, uint a, uint n) {
  const uint t = kv_type(v), off = kv_off(v);
  if (t == KV_F32) {
    for (uint j = 0u; j < n; ++j) kv_put_word(v, off + e + j, floatBitsToUint(s[a + j]));
    return;
  }
  const bool halves = t == KV_F16 || t == KV_BF16;  // one run of n halves; else blocks of 32
  for (uint b0 = 0u; b0 < n; b0 += halves ? n : 32u) {
    const uint x = a + b0;
    float amax = 0.0, mx = 0.0, d = 0.0, id = 0.0;
    uint c = 0u;
    if (!halves)
      for (uint i = 0u; i < 32u; ++i)
        if (amax < abs(s[x + i])) {
          amax = abs(s[x + i]);
          mx = s[x + i];
        }
    if (t == KV_FP8) {
      // ue8m0_ceil_code: the exponent byte, + 1 when any mantissa bit is set (1/448 as the CPU's f32)
      const uint sb = floatBitsToUint(max(amax, 1e-4) * uintBitsToFloat(0x3b124925u));
      c = ((sb >> 23) & 0xffu) + ((sb & 0x7fffffu) != 0u ? 1u : 0u);
      id = uintBitsToFloat((254u - c) << 23);  // 1 / 2^(c−127), exact
    } else if (t == KV_MXFP4) {
      c = amax >= uintBitsToFloat(0x01000000u) ? uint(clamp(kv_floor_log2(amax) + 125, 0, 254)) : 0u;
      d = kv_e8m0_half(c);
    } else if (t == KV_Q8_0) {
      d = amax / 127.0;
      id = amax != 0.0 ? 127.0 / amax : 0.0;
    } else if (t == KV_Q4_0) {
      d = mx / -8.0;
      id = d != 0.0 ? 1.0 / d : 0.0;
    } else if (t == KV_IQ4_NL) {  // indices for the scale as stored
      d = kv_iq4nl_scale(x, amax, mx);
      const float ds = unpackHalf2x16(packHalf2x16(vec2(d, 0.0))).x;
      id = ds != 0.0 ? 1.0 / ds : 0.0;
    }
    kv_put_units(v, t, halves ? off + e : off + ((e + b0) / 32u) * kv_block_units(t), halves ? n : kv_block_units(t),
                 x, d, id, c);
  }
}
#endif
