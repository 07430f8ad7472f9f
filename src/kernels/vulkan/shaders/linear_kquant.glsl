// linear.comp's K-quant weights (included when built with -DTYPE_Q4_K / -DTYPE_Q5_K / -DTYPE_Q6_K):
// row W_r's 256-element super-blocks dotted with the tile's tokens, x in the device's Q8_K form
// (vk_forms.h xform_q8k: per super-block 73 words, d as f32, 256 int8, 16 int16 sums of 16).
// The arithmetic is quant/q4_k.cpp's, q5_k.cpp's and q6_k.cpp's vec_dot: per super-block integer
// sums over its sub-blocks (Σ_j sc_j·Σ q·y and Σ_j m_j·bsum_j: exact, so their order is free), then
//   Q4_K / Q5_K: sum += (d_w·d_x)·float(Σ sc·s) − (dmin_w·d_x)·float(Σ m·bsum)
//   Q6_K:        sum += (d_w·d_x)·float(Σ sc·s)
// Four invocations share a super-block, one 64-element chunk each (lanes 4i .. 4i + 3 of the
// row's workgroup or subgroup: its size is a multiple of 4); their integer sums meet in shared
// memory and the chunk-0 lane scales the total, so the bits are those of one lane doing it all.
// Weights are unpacked a word (four elements) at a time into int8 words dotted as Q8_0 weights are:
// Q4_K / Q5_K levels 0..15 / 0..31; Q6_K levels − 32. Needs load_u32 / load_f16 / dot4, TT and x.

#define KX_WORDS 73u  // a Q8_K block of x in words
#define KSPLIT 4u     // invocations per super-block

#if defined(SUBGROUP)
shared int kq_i[128u * TT], kq_m[128u * TT];  // per invocation: its chunk's sums per token
#else
shared int kq_i[64u * TT], kq_m[64u * TT];
#endif

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// Byte i of the 12-byte scale / min packing (three words).
uint kbyte(uvec3 s, uint i) {
  return bitfieldExtract(s[i >> 2], int(8u * (i & 3u)), 8);
}

// Sub-block j's 6-bit scale and min (quant/q4_k_scales.h): j < 4 in the low 6 bits of bytes j and
// j + 4; j ≥ 4 low 4 bits in byte j + 4, top 2 bits in the high bits of bytes j − 4 and j.
uvec2 kscale_min(uvec3 s, uint j) {
  if (j < 4u) return uvec2(kbyte(s, j) & 63u, kbyte(s, j + 4u) & 63u);
  return uvec2((kbyte(s, j + 4u) & 15u) | ((kbyte(s, j - 4u) >> 6) << 4),
               (kbyte(s, j + 4u) >> 4) | ((kbyte(s, j) >> 6) << 4));
}

// The sum of the int16 pair in word v (bsums 2j and 2j + 1: sub-block j of 32).
int pair_sum(uint v) {
  return bitfieldExtract(int(v), 0, 16) + bitfieldExtract(int(v), 16, 16);
}
#endif

// Chunk c (elements 64c .. 64c + 63) of super-block b (of nbk in the row starting at byte base)
// against tokens t0 .. t0 + nt − 1: its integer sums into isum (and, Q4_K / Q5_K, msum).
void kquant_chunk(uint base, uint b, uint c, uint nbk, uint t0, uint nt, inout int isum[TT],
                  inout int msum[TT]) {
#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#if defined(TYPE_Q4_K)
  const uint a = base + b * 144u, qs = a + 16u;  // d, dmin, scales[12], qs[128]
#else
  const uint a = base + b * 176u, qs = a + 48u;  // d, dmin, scales[12], qh[32], qs[128]
#endif
  const uvec3 s = uvec3(load_u32(a + 4u), load_u32(a + 8u), load_u32(a + 12u));
  uint lo[8], hi[8];  // sub-blocks 2c (low nibbles) and 2c + 1 (high) share 32 bytes
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    const uint q = load_u32(qs + 32u * c + 4u * i);  // elements 4i .. 4i + 3 of both sub-blocks
    lo[i] = q & 0x0f0f0f0fu;
    hi[i] = (q >> 4) & 0x0f0f0f0fu;
#if defined(TYPE_Q5_K)
    const uint h = load_u32(a + 16u + 4u * i) >> (2u * c);  // qh[l]: the fifth bits, bit 2c + half
    lo[i] |= (h & 0x01010101u) << 4;
    hi[i] |= ((h >> 1) & 0x01010101u) << 4;
#endif
  }
  const uvec2 sm0 = kscale_min(s, 2u * c), sm1 = kscale_min(s, 2u * c + 1u);
  [[unroll]] for (uint k = 0u; k < TT; ++k) {
    if (k < nt) {
      const uint xk = ((t0 + k) * nbk + b) * KX_WORDS, xq = xk + 1u + 16u * c;
      int s0 = 0, s1 = 0;
      [[unroll]] for (uint i = 0u; i < 8u; ++i) {
        s0 += dot4(lo[i], x[xq + i]);
        s1 += dot4(hi[i], x[xq + 8u + i]);
      }
      isum[k] += int(sm0.x) * s0 + int(sm1.x) * s1;
      msum[k] += int(sm0.y) * pair_sum(x[xk + 65u + 2u * c]) + int(sm1.y) * pair_sum(x[xk + 66u + 2u * c]);
    }
  }
#else  // Q6_K: ql[128], qh[64], scales[16] (int8), d
  const uint a = base + b * 210u, h = c >> 1;
  for (uint g = 2u * (c & 1u); g < 2u * (c & 1u) + 2u; ++g) {
    // elements 128h + 32g + l: the low (g < 2) or high nibble of ql[64h + 32(g % 2) + l], bits
    // 2g, 2g + 1 of qh[32h + l]; level − 32 (bytes v < 32 get their sign bits set)
    uint q8[8];
    [[unroll]] for (uint i = 0u; i < 8u; ++i) {
      const uint ql = load_u32(a + 64u * h + 32u * (g & 1u) + 4u * i);
      const uint qh = load_u32(a + 128u + 32u * h + 4u * i);
      const uint v = ((g < 2u ? ql : ql >> 4) & 0x0f0f0f0fu) | (((qh >> (2u * g)) & 0x03030303u) << 4);
      const uint neg = ~v & 0x20202020u;
      q8[i] = (v ^ 0x20202020u) | (neg << 1) | (neg << 2);
    }
    const uint sc = load_u32(a + 192u + 8u * h + 2u * g);  // sub-blocks 8h + 2g (words 0..3), + 1
    const int sc0 = bitfieldExtract(int(sc), 0, 8), sc1 = bitfieldExtract(int(sc), 8, 8);
    [[unroll]] for (uint k = 0u; k < TT; ++k) {
      if (k < nt) {
        const uint xq = ((t0 + k) * nbk + b) * KX_WORDS + 1u + 32u * h + 8u * g;
        int s0 = 0, s1 = 0;
        [[unroll]] for (uint i = 0u; i < 4u; ++i) {
          s0 += dot4(q8[i], x[xq + i]);
          s1 += dot4(q8[4u + i], x[xq + 4u + i]);
        }
        isum[k] += sc0 * s0 + sc1 * s1;
      }
    }
  }
#endif
}

// Super-block b's term for each token from its integer sums (vec_dot's scaling; `precise`: no
// fused multiply-add the CPU's scalar code does not do).
void kquant_scale(uint base, uint b, uint nbk, uint t0, uint nt, int isum[TT], int msum[TT],
                  inout float sum[TT]) {
#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#if defined(TYPE_Q4_K)
  const uint a = base + b * 144u;
#else
  const uint a = base + b * 176u;
#endif
  const float dw = load_f16(a), dmw = load_f16(a + 2u);
#else
  const float dw = load_f16(base + b * 210u + 208u);
#endif
  [[unroll]] for (uint k = 0u; k < TT; ++k) {
    if (k < nt) {
      const float dx = uintBitsToFloat(x[((t0 + k) * nbk + b) * KX_WORDS]);
#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
      precise const float d = dw * dx, dmin = dmw * dx;
      precise const float v = d * float(isum[k]) - dmin * float(msum[k]);
#else
      precise const float d = dw * dx;
      precise const float v = d * float(isum[k]);
#endif
      sum[k] += v;
    }
  }
}

// The row's super-blocks: in rounds of nth chunks, lane tid taking chunk tid % 4 of super-block
// (round start + tid) / 4; slot: the lane's index into kq_i / kq_m. The loop is uniform over the
// workgroup (SUBGROUP: the subgroup), so its barriers are too.
void kquant_row(uint base, uint nbk, uint t0, uint nt, uint tid, uint nth, uint slot, inout float sum[TT]) {
  const uint units = nbk * KSPLIT;
  for (uint u0 = 0u; u0 < units; u0 += nth) {
    const uint u = u0 + tid;
    int isum[TT], msum[TT];
    [[unroll]] for (uint k = 0u; k < TT; ++k) isum[k] = msum[k] = 0;
    if (u < units) kquant_chunk(base, u / KSPLIT, u % KSPLIT, nbk, t0, nt, isum, msum);
    [[unroll]] for (uint k = 0u; k < TT; ++k) {
      kq_i[slot * TT + k] = isum[k];
      kq_m[slot * TT + k] = msum[k];
    }
#if defined(SUBGROUP)
    subgroupMemoryBarrierShared();
    subgroupBarrier();
#else
    barrier();
#endif
    if (u < units && u % KSPLIT == 0u) {
      [[unroll]] for (uint q = 1u; q < KSPLIT; ++q) {
        [[unroll]] for (uint k = 0u; k < TT; ++k) {
          isum[k] += kq_i[(slot + q) * TT + k];
          msum[k] += kq_m[(slot + q) * TT + k];
        }
      }
      kquant_scale(base, u / KSPLIT, nbk, t0, nt, isum, msum, sum);
    }
#if defined(SUBGROUP)
    subgroupBarrier();  // the sums are read before the next round writes them
#else
    barrier();
#endif
  }
}
