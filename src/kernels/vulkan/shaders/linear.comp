// y[t][r] = W_r · x[t] (+ bias[r]): one workgroup per (row r, token t), 64 invocations striding
// over the row (elements for F32 / F16, 32-element blocks for the block types, 64-element
// chunks of 256-element super-blocks for the K-quants) and a tree sum.
// Built once per weight type with -DTYPE_F32 / -DTYPE_F16 / -DTYPE_BF16 / -DTYPE_Q8_0 /
// -DTYPE_Q4_0 / -DTYPE_Q5_0 / -DTYPE_Q5_1 / -DTYPE_MXFP4 / -DTYPE_NVFP4 / -DTYPE_Q4_K / -DTYPE_Q5_K /
// -DTYPE_Q6_K (NVFP4: a 32-element pass is half a 64-element block, two sub-blocks each scaled).
// W is bound as bytes (ggml's row layout, at an offset aligned as the type's elements: 4 for F32,
// any for MXFP4, 2 for the others); x comes in the device's form of the weight type's
// vec_dot_type (vk_forms.h), converted as kernels/linear converts:
//   F32: f32 values.  F16 / BF16: f32 values of the f16- / bf16-rounded activations.
//   Q8_0 (for Q8_0, Q4_0, Q5_0, MXFP4): per 32-element block 9 words: the block scale as f32, then
//   32 int8 packed.  Q8_1 (for Q5_1): 10 words, the scale and s = fp16(d·Σq) as f32, then 32 int8.
//   Q8_K (for Q4_K, Q5_K, Q6_K): linear_kquant.glsl.
// Per block the integer sum and its scaling follow quant/q8_0.cpp, q4_0.cpp, q5_0.cpp, q5_1.cpp and
// mxfp4.cpp: sum += float(isum) * (d_w * d_x)   (MXFP4: sum += (d_x * 2^(e−128)) * float(isum);
// Q5_1: sum += (d_w * d_x) * float(isum) + m_w * s_x).
// Built again with -DJOBS: one dispatch runs a list of products of one shape and type (a MoE
// layer's experts over their slots: gate and up together, then down), workgroup z taking job z
// of the table at binding 4, five words per job: the matrix's byte offset (added to w_off), the
// first row of x, the first index of y, the first index of the bias (~0u: none), the tokens. A job's rows are
// computed exactly as the plain build computes them (same per-row order, same bits).
// Tokens come in tiles of up to TT = 8: a workgroup (z) loads each weight block once and dots it
// with every token of its tile (a job: its word 4 is the tile's token count, its tokens the x
// rows and y ranges that follow, y advancing by n_out), each token's sum in the order it would
// have alone. Quantized blocks are unpacked once into eight words of int8 values (Q4_0: nibble
// − 8; Q5_0: (nibble | fifth bit << 4) − 16; Q5_1: nibble | fifth bit << 4; MXFP4: 2 · E2M1) and
// dotted with the activation words as Q8_0 weights are.
// Built again with -DSUBGROUP (where the device has subgroup arithmetic in compute shaders): a
// workgroup of 128 invocations computes one row per subgroup (128 / gl_SubgroupSize rows), the
// subgroup's lanes striding over the row and summed by subgroupAdd: no shared memory and no
// barriers, many rows per workgroup (a GPU's decode GEMV is otherwise bound by short workgroups).
#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#if defined(SUBGROUP)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
#else
layout(local_size_x = 64) in;
#endif

layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) readonly buffer X { uint x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer B { float bias[]; };
#if defined(JOBS)
layout(std430, binding = 4) readonly buffer J { uint job[]; };
#endif

layout(push_constant) uniform Params {
  uint w_off;       // bytes
  uint row_stride;  // bytes
  uint n_in;
  uint n_out;
  uint n_tok;
  uint bias_off;  // f32 index
  uint has_bias;
} p;

#if !defined(SUBGROUP)
shared float partial[64];
#endif

#if defined(TYPE_MXFP4) || defined(TYPE_NVFP4)
// E2M1 code c times 2: |value| nibbles 0, 1, 2, 3, 4, 6, 8, 12 packed in one word (no table in
// memory), the sign from bit 3.
int e2m1x2(uint c) {
  const int v = int((0xC8643210u >> (4u * (c & 7u))) & 0xFu);
  return (c & 8u) != 0u ? -v : v;
}
#endif

#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
// Four Q5_0 / Q5_1 levels (less `off`) as int8 (low byte first): the nibbles at bit `shift` of q's
// bytes, their fifth bits h's bits 0..3.
uint q5_word(uint q, uint shift, uint h, int off) {
  uint r = 0u;
  [[unroll]] for (uint j = 0u; j < 4u; ++j) {
    const int v = int(bitfieldExtract(q, int(8u * j + shift), 4) | (bitfieldExtract(h, int(j), 1) << 4)) - off;
    r |= (uint(v) & 0xffu) << (8u * j);
  }
  return r;
}
#endif
#if defined(TYPE_NVFP4)
// Half of a UE4M3 scale byte as ggml reads it (quant/fp8_fp4.cpp kNvfp4ScaleHalf): m·2^-10 for
// exponent 0, (8 + m)·2^(e−11) above; bit 7 ignored; 0x7F reads 0. Exact (ldexp).
float nv_scale_half(uint b) {
  if (b == 0x7fu) return 0.0;
  const uint e = (b >> 3) & 0xfu, m = b & 7u;
  return e == 0u ? ldexp(float(m), -10) : ldexp(float(8u + m), int(e) - 11);
}
#endif

uint load_u16(uint a) { return (w[a >> 2] >> ((a & 2u) * 8u)) & 0xffffu; }  // a even
float load_f16(uint a) { return unpackHalf2x16(load_u16(a)).x; }
uint load_u32(uint a) {  // any a: one or two words
  const uint lo = w[a >> 2], sh = (a & 3u) * 8u;
  if (sh == 0u) return lo;
  return (lo >> sh) | (w[(a >> 2) + 1u] << (32u - sh));
}
int dot4(uint a, uint b) {
  int s = 0;
  for (int j = 0; j < 4; ++j) s += bitfieldExtract(int(a), 8 * j, 8) * bitfieldExtract(int(b), 8 * j, 8);
  return s;
}

#define TT 8u
#if defined(TYPE_Q5_1)
#define XB_WORDS 10u  // x's Q8_1 blocks: d, s, 8 words of int8
#else
#define XB_WORDS 9u  // x's Q8_0 blocks: d, 8 words of int8
#endif

// Four int8 values (low byte first) in one word.
uint pack4(int a, int b, int c, int d) {
  return (uint(a) & 0xffu) | ((uint(b) & 0xffu) << 8) | ((uint(c) & 0xffu) << 16) | (uint(d) << 24);
}
#if defined(TYPE_NVFP4)
// Four E2M1 nibbles of q (the low or high nibble of each byte) as doubled int8 values.
uint nv_word(uint q, int hi) {
  return pack4(e2m1x2(bitfieldExtract(q, hi, 4)), e2m1x2(bitfieldExtract(q, 8 + hi, 4)),
               e2m1x2(bitfieldExtract(q, 16 + hi, 4)), e2m1x2(bitfieldExtract(q, 24 + hi, 4)));
}
#endif

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_Q6_K)
#define KQUANT
#include "linear_kquant.glsl"
#endif

void main() {
#if defined(SUBGROUP)
  const uint r = (gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u) * gl_NumSubgroups + gl_SubgroupID;
  if (r >= p.n_out) return;  // the whole subgroup
  const uint tid = gl_SubgroupInvocationID, nth = gl_SubgroupSize;
#else
  const uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u;
  if (r >= p.n_out) return;  // the whole workgroup
  const uint tid = gl_LocalInvocationID.x, nth = 64u;
#endif
#if defined(JOBS)
  const uint z = 5u * gl_WorkGroupID.z;
  const uint t0 = job[z + 1u], y0 = job[z + 2u] + r, bias_at = job[z + 3u], nt = job[z + 4u];
  const uint base = p.w_off + job[z] + r * p.row_stride;
#else
  const uint t0 = TT * gl_WorkGroupID.z;
  const uint nt = min(TT, p.n_tok - TT * gl_WorkGroupID.z);
  const uint y0 = t0 * p.n_out + r, bias_at = p.has_bias != 0u ? p.bias_off : ~0u;
  const uint base = p.w_off + r * p.row_stride;
#endif
  float sum[TT];
  [[unroll]] for (uint k = 0u; k < TT; ++k) sum[k] = 0.0;
#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
  for (uint i = tid; i < p.n_in; i += nth) {
#if defined(TYPE_F32)
    const float wv = uintBitsToFloat(w[(base >> 2) + i]);
#elif defined(TYPE_F16)
    const float wv = load_f16(base + 2u * i);
#else
    const float wv = uintBitsToFloat(load_u16(base + 2u * i) << 16);
#endif
    [[unroll]] for (uint k = 0u; k < TT; ++k)
      if (k < nt) sum[k] += wv * uintBitsToFloat(x[(t0 + k) * p.n_in + i]);
  }
#elif defined(KQUANT)
#if defined(SUBGROUP)
  kquant_row(base, p.n_in / 256u, t0, nt, tid, nth, gl_SubgroupID * gl_SubgroupSize + tid, sum);
#else
  kquant_row(base, p.n_in / 256u, t0, nt, tid, nth, tid, sum);
#endif
#else
  const uint nb = p.n_in / 32u;
  for (uint b = tid; b < nb; b += nth) {
    uint q8[8];  // the block's 32 weights as int8, four per word, elements in order
#if defined(TYPE_Q8_0)
    const uint a = base + b * 34u;
    const float dw = load_f16(a);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) q8[k] = load_u32(a + 2u + 4u * k);
#elif defined(TYPE_Q4_0)
    const uint a = base + b * 18u;
    const float dw = load_f16(a);
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      // bytes 4k..4k+3: low nibbles are elements 4k.., high nibbles elements 16 + 4k.., each − 8
      const uint q = load_u32(a + 2u + 4u * k);
      q8[k] = pack4(int(bitfieldExtract(q, 0, 4)) - 8, int(bitfieldExtract(q, 8, 4)) - 8,
                    int(bitfieldExtract(q, 16, 4)) - 8, int(bitfieldExtract(q, 24, 4)) - 8);
      q8[4u + k] = pack4(int(bitfieldExtract(q, 4, 4)) - 8, int(bitfieldExtract(q, 12, 4)) - 8,
                         int(bitfieldExtract(q, 20, 4)) - 8, int(bitfieldExtract(q, 28, 4)) - 8);
    }
#elif defined(TYPE_Q5_0)
    const uint a = base + b * 22u;  // d, qh (bit e: element e's fifth bit), qs as Q4_0's
    const float dw = load_f16(a);
    const uint qh = load_u32(a + 2u);
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint q = load_u32(a + 6u + 4u * k);
      q8[k] = q5_word(q, 0u, qh >> (4u * k), 16);
      q8[4u + k] = q5_word(q, 4u, qh >> (16u + 4u * k), 16);
    }
#elif defined(TYPE_Q5_1)
    const uint a = base + b * 24u;  // d, m, qh, qs as Q5_0's
    const float dw = load_f16(a), mw = load_f16(a + 2u);
    const uint qh = load_u32(a + 4u);
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint q = load_u32(a + 8u + 4u * k);
      q8[k] = q5_word(q, 0u, qh >> (4u * k), 0);
      q8[4u + k] = q5_word(q, 4u, qh >> (16u + 4u * k), 0);
    }
#elif defined(TYPE_MXFP4)
    const uint a = base + b * 17u;
    // E8M0: 2^(e − 128) (the E2M1 values are doubled), subnormal below e = 2
    const uint e = load_u32(a) & 0xffu;
    const float half_scale = uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23));
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      // as Q4_0, the nibble an index into E2M1 values times 2 (quant/fp8_fp4.h kMxfp4Values2x)
      const uint q = load_u32(a + 1u + 4u * k);
      q8[k] = pack4(e2m1x2(bitfieldExtract(q, 0, 4)), e2m1x2(bitfieldExtract(q, 8, 4)),
                    e2m1x2(bitfieldExtract(q, 16, 4)), e2m1x2(bitfieldExtract(q, 24, 4)));
      q8[4u + k] = pack4(e2m1x2(bitfieldExtract(q, 4, 4)), e2m1x2(bitfieldExtract(q, 12, 4)),
                         e2m1x2(bitfieldExtract(q, 20, 4)), e2m1x2(bitfieldExtract(q, 28, 4)));
    }
#elif defined(TYPE_NVFP4)
    // 32 elements: half h of a 64-element block (36 bytes: 4 UE4M3 scales, 32 bytes of nibbles), its
    // sub-blocks 2h and 2h + 1 (16 elements each: byte j's low nibble element j, high nibble j + 8)
    const uint a = base + (b >> 1) * 36u, h = b & 1u;
    const uint sc = load_u32(a);
    const float sh0 = nv_scale_half(bitfieldExtract(sc, int(16u * h), 8));
    const float sh1 = nv_scale_half(bitfieldExtract(sc, int(16u * h + 8u), 8));
    const uint q0 = load_u32(a + 4u + 16u * h), q1 = load_u32(a + 8u + 16u * h);
    const uint q2 = load_u32(a + 12u + 16u * h), q3 = load_u32(a + 16u + 16u * h);
    q8[0] = nv_word(q0, 0);
    q8[1] = nv_word(q1, 0);
    q8[2] = nv_word(q0, 4);
    q8[3] = nv_word(q1, 4);
    q8[4] = nv_word(q2, 0);
    q8[5] = nv_word(q3, 0);
    q8[6] = nv_word(q2, 4);
    q8[7] = nv_word(q3, 4);
#endif
    [[unroll]] for (uint k = 0u; k < TT; ++k) {
      if (k < nt) {
        const uint xb = ((t0 + k) * nb + b) * XB_WORDS;
#if defined(TYPE_NVFP4)  // a sum per sub-block, each scaled as quant/nvfp4.cpp's vec_dot does
        int s0 = 0, s1 = 0;
        [[unroll]] for (uint j = 0u; j < 4u; ++j) s0 += dot4(q8[j], x[xb + 1u + j]);
        [[unroll]] for (uint j = 4u; j < 8u; ++j) s1 += dot4(q8[j], x[xb + 1u + j]);
        const float dx = uintBitsToFloat(x[xb]);
        sum[k] += (dx * sh0) * float(s0);
        sum[k] += (dx * sh1) * float(s1);
#else
        int s = 0;
        [[unroll]] for (uint j = 0u; j < 8u; ++j) s += dot4(q8[j], x[xb + XB_WORDS - 8u + j]);
#endif
#if defined(TYPE_NVFP4)
#elif defined(TYPE_MXFP4)
        sum[k] += (uintBitsToFloat(x[xb]) * half_scale) * float(s);
#elif defined(TYPE_Q5_1)
        precise const float v = (dw * uintBitsToFloat(x[xb])) * float(s) + mw * uintBitsToFloat(x[xb + 1u]);
        sum[k] += v;
#else
        sum[k] += float(s) * (dw * uintBitsToFloat(x[xb]));
#endif
      }
    }
  }
#endif
  [[unroll]] for (uint k = 0u; k < TT; ++k) {
    if (k >= nt) break;  // uniform across the subgroup / workgroup
#if defined(SUBGROUP)
    const float v0 = subgroupAdd(sum[k]);
    if (tid == 0u) {
      float v = v0;
#else
    partial[tid] = sum[k];
    barrier();
    for (uint h = 32u; h > 0u; h >>= 1) {
      if (tid < h) partial[tid] += partial[tid + h];
      barrier();
    }
    if (tid == 0u) {
      float v = partial[0];
#endif
      if (bias_at != ~0u) v += bias[bias_at + r];
      y[y0 + k * p.n_out] = v;
    }
#if !defined(SUBGROUP)
    barrier();  // partial[0] is read before the next token writes it
#endif
  }
}
