// h = act(g, u) for n tokens of F values (kernels/ops.h: act 0 swiglu silu(g)·u; 1 swiglu_oai
// min(g,L)·σ(α·min(g,L))·(clamp(u,−L,L) + 1); 2 swiglu_clamped silu(min(g,L))·clamp(u,−L,L);
// 3 g itself: the attention's o rows converted for the output projection, u unused),
// written in the device's form
// of down's vec_dot_type (linear.comp's x): one invocation per token and block of 32 values.
//   form 0 (F32): f32.  form 1 (F16): f32 values of h rounded to f16 (to nearest, ties to even).
//   form 2 (Q8_0): per block 9 words, d = fp16(amax / 127) as f32, then 32 int8
//   q = round_half_even(h · 127 / amax) packed (quant/q8_0.cpp from_float_q8_0).
//   form 3 (BF16): f32 values of h rounded to bf16 (base/fp16.h f32_to_bf16).
//   form 5 (Q8_1): form 2's d and codes, then s = fp16(d·Σq) (quant/q5_1.cpp from_float_q8_1),
//   per block 10 words: d and s as f32, 32 int8.
//   form 4 (Q8_K, F a multiple of 256): the invocation of each 256-value block's first 32 writes
//   quant/q8_k.cpp from_float_q8_k's block (73 words): max = the first value of largest magnitude,
//   q = min(round_half_even(−127 / max · h), 127), the 16 sums of 16, d = 1 / (−127 / max).
#version 450

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(std430, binding = 2) writeonly buffer H { uint h[]; };

layout(push_constant) uniform Params {
  uint n_tok;
  uint F;
  uint form;
  uint act;
  float alpha;
  float limit;
} p;

// v rounded to the nearest f16 value, ties to even; beyond the f16 range: ±inf.
float round_f16(float v) {
  const uint b = floatBitsToUint(v);
  const uint s = b & 0x80000000u, a = b & 0x7fffffffu;
  if (a >= 0x7f800000u) return v;                                        // inf, nan
  if (a >= 0x477ff000u) return uintBitsToFloat(s | 0x7f800000u);         // ≥ 65520: inf
  if (a < 0x38800000u) return (s != 0u ? -1.0 : 1.0) * roundEven(abs(v) * 16777216.0) / 16777216.0;  // subnormal
  const uint r = (a + 0x0fffu + ((a >> 13) & 1u)) & 0xffffe000u;
  return uintBitsToFloat(s | r);
}

float round_bf16(float v) {
  const uint b = floatBitsToUint(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) return uintBitsToFloat((b | 0x00400000u) & 0xffff0000u);  // quiet nan
  return uintBitsToFloat((b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u);
}

float act(uint i) {
  if (p.act == 3u) return g[i];
  if (p.act == 0u) return g[i] / (1.0 + exp(-g[i])) * u[i];
  const float x = min(g[i], p.limit), y = clamp(u[i], -p.limit, p.limit);
  if (p.act == 1u) return x / (1.0 + exp(p.alpha * (-x))) * (y + 1.0);
  return x / (1.0 + exp(-x)) * y;
}

// The Q8_K block of the 256 values from i0 into words o .. o + 72 (act evaluated twice: the
// maximum, then the codes).
void to_q8_k(uint i0, uint o) {
  float amax = 0.0, mx = 0.0;
  for (uint j = 0u; j < 256u; ++j) {
    const float v = act(i0 + j);
    if (abs(v) > amax) {
      amax = abs(v);
      mx = v;
    }
  }
  if (amax == 0.0) {
    for (uint k = 0u; k < 73u; ++k) h[o + k] = 0u;
    return;
  }
  const float iscale = -127.0 / mx;
  for (uint g = 0u; g < 8u; ++g) {  // 32 values: 8 words of codes, one word of two sums
    int s0 = 0, s1 = 0;
    for (uint k = 0u; k < 8u; ++k) {
      uint word = 0u;
      for (uint j = 0u; j < 4u; ++j) {
        const int q = min(int(roundEven(iscale * act(i0 + 32u * g + 4u * k + j))), 127);
        if (k < 4u) {
          s0 += q;
        } else {
          s1 += q;
        }
        word |= uint(q & 0xff) << (8u * j);
      }
      h[o + 1u + 8u * g + k] = word;
    }
    h[o + 65u + g] = (uint(s0) & 0xffffu) | (uint(s1) << 16);
  }
  h[o] = floatBitsToUint(1.0 / iscale);
}

void main() {
  const uint nb = (p.F + 31u) / 32u;
  const uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 64u;
  if (id >= p.n_tok * nb) return;
  const uint t = id / nb, b = id % nb;
  const uint i0 = t * p.F + b * 32u, m = min(32u, p.F - b * 32u);
  if (p.form == 4u) {
    if ((b & 7u) == 0u) to_q8_k(i0, (t * (p.F / 256u) + b / 8u) * 73u);
    return;
  }
  if (p.form != 2u && p.form != 5u) {
    for (uint j = 0u; j < m; ++j) {
      const float v = act(i0 + j);
      h[i0 + j] = floatBitsToUint(p.form == 1u ? round_f16(v) : p.form == 3u ? round_bf16(v) : v);
    }
    return;
  }
  float v[32];
  float amax = 0.0;
  for (uint j = 0u; j < 32u; ++j) {
    v[j] = act(i0 + j);
    amax = max(amax, abs(v[j]));
  }
  const float d = amax / 127.0;
  const float inv = amax != 0.0 ? 127.0 / amax : 0.0;
  const uint o = (t * nb + b) * (p.form == 5u ? 10u : 9u), qo = o + (p.form == 5u ? 2u : 1u);
  h[o] = floatBitsToUint(round_f16(d));
  int total = 0;
  for (uint k = 0u; k < 8u; ++k) {
    uint word = 0u;
    for (uint j = 0u; j < 4u; ++j) {
      const int q = clamp(int(roundEven(v[4u * k + j] * inv)), -128, 127);
      total += q;
      word |= uint(q & 0xff) << (8u * j);
    }
    h[qo + k] = word;
  }
  if (p.form == 5u) h[o + 1u] = floatBitsToUint(round_f16(d * float(total)));
}
