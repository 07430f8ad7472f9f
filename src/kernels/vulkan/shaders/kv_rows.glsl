// A cache's K and V rows as attn_rope.comp writes them and attention.comp reads them
// (kernels/kv_rows.h in GLSL). Included after the including shader declares S (s[], f32), KC
// (kc[]) and VC (vc[]) (uint words) and its push constants p with kc_off / vc_off, cap_k / cap_v,
// kt_off / vt_off, br_k / br_v and flags:
//   bit 0 / 1: K / V is a ring (slot j mod cap);
//   bits 2-3 / 4-5: the K / V rows' type: 0 f32, 1 f16, 2 q8_0, 3 q4_0 (quant/'s blocks of 32:
//     an f16 scale, then 32 int8 (34 bytes) or 16 bytes of nibbles (18 bytes));
//   bit 6 / 7: K / V rows are paged: row j is slot tab[j / br]·br + j mod br, tab the block
//     table at S[kt_off..] / S[vt_off..] (int32 bits);
//   bit 8 / 9: the K / V rows' head slices are stored Hadamard-rotated (kv_hadamard).
// Value e of the rows (e = slot·width + column) sits at word kc_off + e (f32), half kc_off + e
// (f16) or in block e / 32 at half kc_off + (e / 32)·17 (q8_0) / ·9 (q4_0): kc_off / vc_off count
// words for f32 rows and 16-bit halves otherwise (rows of 16-bit halves may start mid-word: a
// KV pool's regions follow each other). Functions take v: false for K, true for V.

#define KV_F32 0u
#define KV_F16 1u
#define KV_Q8_0 2u
#define KV_Q4_0 3u

uint kv_type(bool v) {
  return (p.flags >> (v ? 4u : 2u)) & 3u;
}
uint kv_off(bool v) {
  return v ? p.vc_off : p.kc_off;
}
// The halves of one block of a block type.
uint kv_block_halves(uint t) {
  return t == KV_Q8_0 ? 17u : 9u;
}

bool kv_rotated(bool v) {
  return (p.flags & (v ? 512u : 256u)) != 0u;
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
  if ((p.flags & (v ? 128u : 64u)) != 0u) {
    const uint br = v ? p.br_v : p.br_k;
    return floatBitsToUint(s[(v ? p.vt_off : p.kt_off) + j / br]) * br + j % br;
  }
  return j;
}

#ifdef KV_READ
uint kv_word(bool v, uint i) {
  return v ? vc[i] : kc[i];
}
uint kv_half(bool v, uint h) {
  return (kv_word(v, h >> 1) >> ((h & 1u) << 4)) & 0xffffu;
}
// Value e of f32 or f16 rows.
float kv_value(bool v, uint e) {
  const uint i = kv_off(v) + e;
  return kv_type(v) == KV_F32 ? uintBitsToFloat(kv_word(v, i)) : unpackHalf2x16(kv_half(v, i)).x;
}
// The first half of the block of a block type that holds value e (e a multiple of 32).
uint kv_block(bool v, uint e) {
  return kv_off(v) + (e / 32u) * kv_block_halves(kv_type(v));
}
float kv_scale(bool v, uint h) {
  return unpackHalf2x16(kv_half(v, h)).x;
}
// Value i (< 32) of the block at half h as an integer: q8_0's int8, q4_0's nibble − 8 (byte i
// holds values i and i + 16).
int kv_int(bool v, uint h, uint i) {
  if (kv_type(v) == KV_Q8_0) return bitfieldExtract(int(kv_half(v, h + 1u + i / 2u)), int((i & 1u) * 8u), 8);
  const uint b = i & 15u;
  const uint byte_ = (kv_half(v, h + 1u + b / 2u) >> ((b & 1u) * 8u)) & 0xffu;
  return int(i < 16u ? byte_ & 15u : byte_ >> 4) - 8;
}
#endif

#ifdef KV_WRITE
void kv_put_word(bool v, uint i, uint x) {
  if (v)
    vc[i] = x;
  else
    kc[i] = x;
}
// A half of a word another invocation writes the other half of.
void kv_put_half(bool v, uint h, uint x) {
  const uint sh = (h & 1u) << 4;
  if (v) {
    atomicAnd(vc[h >> 1], ~(0xffffu << sh));
    atomicOr(vc[h >> 1], x << sh);
  } else {
    atomicAnd(kc[h >> 1], ~(0xffffu << sh));
    atomicOr(kc[h >> 1], x << sh);
  }
}

// Half k of what S[x..) becomes: f16 rows: value k (packHalf2x16); a block of a block type made
// from S[x..x+32) (quant/'s from_float): k = 0 the scale d as f16, else values 2(k−1), 2(k−1)+1
// (q8_0: q = round-half-even(x · id), id = 127 / amax) or bytes 2(k−1), 2(k−1)+1 (q4_0: byte i
// holds values i and i + 16 as min(15, trunc(x · id + 8.5)), id = 1 / d).
uint kv_new_half(uint t, uint x, float d, float id, uint k) {
  if (t == KV_F16) return packHalf2x16(vec2(s[x + k], 0.0)) & 0xffffu;
  if (k == 0u) return packHalf2x16(vec2(d, 0.0)) & 0xffffu;
  const uint i = 2u * (k - 1u);
  if (t == KV_Q8_0) {
    const int q0 = clamp(int(roundEven(s[x + i] * id)), -128, 127);
    const int q1 = clamp(int(roundEven(s[x + i + 1u] * id)), -128, 127);
    return (uint(q0) & 0xffu) | ((uint(q1) & 0xffu) << 8);
  }
  uint h = 0u;
  for (uint b = 0u; b < 2u; ++b) {
    precise float f0 = s[x + i + b] * id + 8.5;
    precise float f1 = s[x + i + b + 16u] * id + 8.5;
    h |= (uint(min(int(f0), 15)) | (uint(min(int(f1), 15)) << 4)) << (8u * b);
  }
  return h;
}

// Halves [h, h + nh) of the rows from kv_new_half: whole words stored, a word shared with the
// neighbouring head or block (another invocation's) atomically.
void kv_put_halves(bool v, uint t, uint h, uint nh, uint x, float d, float id) {
  uint k = 0u;
  if ((h & 1u) != 0u) {
    kv_put_half(v, h, kv_new_half(t, x, d, id, 0u));
    k = 1u;
  }
  for (; k + 1u < nh; k += 2u)
    kv_put_word(v, (h + k) >> 1, kv_new_half(t, x, d, id, k) | (kv_new_half(t, x, d, id, k + 1u) << 16));
  if (k < nh) kv_put_half(v, h + k, kv_new_half(t, x, d, id, k));
}

// The values S[a..a+n) into the rows from value e (n and e multiples of 32 for block types, even
// for f16), converted as quant/'s from_float converts: q8_0 d = amax / 127; q4_0 d = max / −8
// (max: the value of largest magnitude).
void kv_store(bool v, uint e, uint a, uint n) {
  const uint t = kv_type(v), off = kv_off(v);
  if (t == KV_F32) {
    for (uint j = 0u; j < n; ++j) kv_put_word(v, off + e + j, floatBitsToUint(s[a + j]));
    return;
  }
  if (t == KV_F16) {
    kv_put_halves(v, t, off + e, n, a, 0.0, 0.0);
    return;
  }
  for (uint b0 = 0u; b0 < n; b0 += 32u) {
    const uint x = a + b0;
    float amax = 0.0, mx = 0.0;
    for (uint i = 0u; i < 32u; ++i)
      if (amax < abs(s[x + i])) {
        amax = abs(s[x + i]);
        mx = s[x + i];
      }
    float d, id;
    if (t == KV_Q8_0) {
      d = amax / 127.0;
      id = amax != 0.0 ? 127.0 / amax : 0.0;
    } else {
      d = mx / -8.0;
      id = d != 0.0 ? 1.0 / d : 0.0;
    }
    const uint nh = kv_block_halves(t);
    kv_put_halves(v, t, off + ((e + b0) / 32u) * nh, nh, x, d, id);
  }
}
#endif
