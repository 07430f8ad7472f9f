// y[t][r] = W_r · x[t] (+ bias[r]): one workgroup per (row r, token t), 64 invocations striding
// over the row (elements for F32 / F16, 32-element blocks for Q8_0 / Q4_0) and a tree sum.
// Built once per weight type with -DTYPE_F32 / -DTYPE_F16 / -DTYPE_BF16 / -DTYPE_Q8_0 /
// -DTYPE_Q4_0 / -DTYPE_MXFP4. W is bound as bytes (ggml's row layout, at an offset aligned as
// the type's elements: 4 for F32, 2 for F16 / BF16 / Q8_0 / Q4_0, any for MXFP4); x comes in the
// device's form of the weight type's vec_dot_type, converted as kernels/linear converts:
//   F32: f32 values.  F16 / BF16: f32 values of the f16- / bf16-rounded activations.
//   Q8_0 (for Q8_0, Q4_0, MXFP4): per 32-element block 9 words: the block scale as f32, then
//   32 int8 packed.
// Per block the integer sum and its scaling follow quant/q8_0.cpp, q4_0.cpp and mxfp4.cpp:
//   sum += float(isum) * (d_w * d_x)   (MXFP4: sum += (d_x * 2^(e−128)) * float(isum)).
#version 450

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) readonly buffer X { uint x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer B { float bias[]; };

layout(push_constant) uniform Params {
  uint w_off;       // bytes
  uint row_stride;  // bytes
  uint n_in;
  uint n_out;
  uint n_tok;
  uint bias_off;  // f32 index
  uint has_bias;
  uint row0;  // rows row0.. of x and y (an expert's slots among all grouped slots)
} p;

shared float partial[64];

#if defined(TYPE_MXFP4)
const int kE2m1x2[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
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

void main() {
  const uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u;
  const uint t = p.row0 + gl_WorkGroupID.z;
  if (r >= p.n_out) return;  // the whole workgroup
  const uint tid = gl_LocalInvocationID.x;
  const uint base = p.w_off + r * p.row_stride;
  float sum = 0.0;
#if defined(TYPE_F32)
  const uint xb = t * p.n_in;
  for (uint i = tid; i < p.n_in; i += 64u) sum += uintBitsToFloat(w[(base >> 2) + i]) * uintBitsToFloat(x[xb + i]);
#elif defined(TYPE_F16)
  const uint xb = t * p.n_in;
  for (uint i = tid; i < p.n_in; i += 64u) sum += load_f16(base + 2u * i) * uintBitsToFloat(x[xb + i]);
#elif defined(TYPE_BF16)
  const uint xb = t * p.n_in;
  for (uint i = tid; i < p.n_in; i += 64u)
    sum += uintBitsToFloat(load_u16(base + 2u * i) << 16) * uintBitsToFloat(x[xb + i]);
#else
  const uint nb = p.n_in / 32u;
  for (uint b = tid; b < nb; b += 64u) {
    const uint xb = (t * nb + b) * 9u;
    int s = 0;
#if defined(TYPE_Q8_0)
    const uint a = base + b * 34u;
    for (uint k = 0u; k < 8u; ++k) s += dot4(load_u32(a + 2u + 4u * k), x[xb + 1u + k]);
#elif defined(TYPE_Q4_0)
    const uint a = base + b * 18u;
    for (uint k = 0u; k < 4u; ++k) {
      // bytes 4k..4k+3: low nibbles are elements 4k.., high nibbles elements 16 + 4k.., each − 8
      const uint q = load_u32(a + 2u + 4u * k), xl = x[xb + 1u + k], xh = x[xb + 5u + k];
      for (int j = 0; j < 4; ++j)
        s += (int(bitfieldExtract(q, 8 * j, 4)) - 8) * bitfieldExtract(int(xl), 8 * j, 8) +
             (int(bitfieldExtract(q, 8 * j + 4, 4)) - 8) * bitfieldExtract(int(xh), 8 * j, 8);
    }
#elif defined(TYPE_MXFP4)
    const uint a = base + b * 17u;
    for (uint k = 0u; k < 4u; ++k) {
      // as Q4_0, the nibble an index into E2M1 values times 2 (quant/fp8_fp4.h kMxfp4Values2x)
      const uint q = load_u32(a + 1u + 4u * k), xl = x[xb + 1u + k], xh = x[xb + 5u + k];
      for (int j = 0; j < 4; ++j)
        s += kE2m1x2[bitfieldExtract(q, 8 * j, 4)] * bitfieldExtract(int(xl), 8 * j, 8) +
             kE2m1x2[bitfieldExtract(q, 8 * j + 4, 4)] * bitfieldExtract(int(xh), 8 * j, 8);
    }
#endif
#if defined(TYPE_MXFP4)
    const uint e = load_u32(a) & 0xffu;  // E8M0: 2^(e − 128), subnormal below e = 2
    const float half_scale = uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23));
    sum += (uintBitsToFloat(x[xb]) * half_scale) * float(s);
#else
    sum += float(s) * (load_f16(a) * uintBitsToFloat(x[xb]));
#endif
  }
#endif
  partial[tid] = sum;
  barrier();
  for (uint h = 32u; h > 0u; h >>= 1) {
    if (tid < h) partial[tid] += partial[tid + h];
    barrier();
  }
  if (tid == 0u) {
    float v = partial[0];
    if (p.has_bias != 0u) v += bias[p.bias_off + r];
    y[t * p.n_out + r] = v;
  }
}
