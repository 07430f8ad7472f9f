// The attention of one segment's tokens (kernels/attention_core.h): for token i at position
// pos = pos0 + i and query head h (kv head h / (n_head / n_kv)), over the cache rows j of its
// causal / sliding-window range max(0, pos − window + 1) .. pos (window 0: from 0),
//   s_j = scale · q·k_j,  M = max(max_j s_j, sink),
//   o = Σ_j e^(s_j − M) v_j / (e^(sink − M) + Σ_j e^(s_j − M))   (no sink: no sink term).
// One workgroup per (token, head); invocation l takes keys j ≡ l (mod 64) with an online
// softmax (its own max, denominator and accumulator), and the 64 partial results are combined
// at the end. q and o are rows of S (f32; offsets are f32 indices), sinks S[sink_off..]. K / V
// rows (kv_rows.glsl: linear, ring or paged; every KV type) are read in place with the CPU's
// numerics (kernels/kv_row_ops.cpp): f32 / f16 / bf16 / fp8 / mxfp4 values as f32 (quant/'s
// to_float); for q8_0 / q4_0 / iq4_nl K the query as Q8_0 blocks (quant/q8_0.cpp from_float)
// and per block the integer dot times (d_k · d_q); for such V per block
// fma(weight · d, value, acc).
#version 450
#extension GL_GOOGLE_include_directive : require

#define MAX_HD 256
#define NO_KEY -3.402823466e38  // m before the first key (exp(NO_KEY − s) is 0)

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer S { float s[]; };
layout(std430, binding = 1) readonly buffer KC { uint kc[]; };  // kv_rows.glsl
layout(std430, binding = 2) readonly buffer VC { uint vc[]; };

layout(push_constant) uniform Params {
  uint n_tok;
  uint t0;
  uint pos0;
  uint n_head;
  uint n_kv;
  uint hdk;
  uint hdv;
  uint window;
  float scale;
  uint q_off, o_off, sink_off;  // sink_off: ~0u when absent
  uint kc_off, vc_off;
  uint cap_k, cap_v;
  uint flags;           // kv_rows.glsl
  uint kt_off, vt_off;  // paged: the block tables in S
  uint br_k, br_v;      // paged: rows per block
} p;

#define KV_READ
#include "kv_rows.glsl"

shared float qs[MAX_HD];
shared int qq[MAX_HD];       // block-type K: the query's Q8_0 values
shared float qd[MAX_HD / 32];  // and scales

// The integer block types' q·k of the key whose head starts at value e: per block Σ q_i·k_i
// (integers) times (d_k · d_q), summed in block order (quant/'s q8_0, q4_0, iq4_nl vec_dot).
float dot_blocks(uint e) {
  float sum = 0.0;
  for (uint b = 0u; b < p.hdk / 32u; ++b) {
    const uint h = kv_block(false, e + 32u * b);
    int si = 0;
    for (uint i = 0u; i < 32u; ++i) si += kv_int(false, h, i) * qq[32u * b + i];
    sum += float(si) * (kv_scale(false, h) * qd[b]);
  }
  return sum;
}
shared float red_m[64];
shared float red_l[64];
shared float red[64 * 32];

void main() {
  const uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationID.x;
  const uint t = p.t0 + i, pos = p.pos0 + i;
  const uint hk = h / (p.n_head / p.n_kv);
  const uint qa = p.q_off + (t * p.n_head + h) * p.hdk;
  for (uint d = tid; d < p.hdk; d += 64u) qs[d] = s[qa + d];
  barrier();
  const bool k_blocks = kv_int_blocks(kv_type(false)), v_blocks = kv_int_blocks(kv_type(true));
  if (k_blocks && tid < p.hdk / 32u) {  // quant/q8_0.cpp from_float of block tid
    float amax = 0.0;
    for (uint i = 0u; i < 32u; ++i) amax = max(amax, abs(qs[32u * tid + i]));
    const float id = amax != 0.0 ? 127.0 / amax : 0.0;
    qd[tid] = unpackHalf2x16(packHalf2x16(vec2(amax / 127.0, 0.0))).x;
    for (uint i = 0u; i < 32u; ++i) qq[32u * tid + i] = clamp(int(roundEven(qs[32u * tid + i] * id)), -128, 127);
  }
  barrier();

  const uint j0 = p.window > 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u;
  float m = NO_KEY, l = 0.0;
  float acc[MAX_HD];
  for (uint d = 0u; d < p.hdv; ++d) acc[d] = 0.0;
  for (uint j = j0 + tid; j <= pos; j += 64u) {
    const uint ke = kv_slot(false, j) * p.n_kv * p.hdk + hk * p.hdk;
    const uint ve = kv_slot(true, j) * p.n_kv * p.hdv + hk * p.hdv;
    float dot = 0.0;
    if (k_blocks)
      dot = dot_blocks(ke);
    else
      for (uint d = 0u; d < p.hdk; ++d) dot += qs[d] * kv_value(false, ke + d);
    const float sc = p.scale * dot;
    if (sc > m) {
      const float f = exp(m - sc);  // 0 for the first key
      l *= f;
      for (uint d = 0u; d < p.hdv; ++d) acc[d] *= f;
      m = sc;
    }
    const float e = exp(sc - m);
    l += e;
    if (v_blocks)
      for (uint b = 0u; b < p.hdv; b += 32u) {
        const uint h = kv_block(true, ve + b);
        const float c = e * kv_scale(true, h);
        for (uint i = 0u; i < 32u; ++i) acc[b + i] = fma(c, float(kv_int(true, h, i)), acc[b + i]);
      }
    else
      for (uint d = 0u; d < p.hdv; ++d) acc[d] += e * kv_value(true, ve + d);
  }

  // M over the invocations and the sink, then the denominator.
  red_m[tid] = m;
  barrier();
  for (uint st = 32u; st > 0u; st >>= 1) {
    if (tid < st) red_m[tid] = max(red_m[tid], red_m[tid + st]);
    barrier();
  }
  const bool has_sink = p.sink_off != ~0u;
  const float sink = has_sink ? s[p.sink_off + h] : 0.0;
  const float mx = has_sink ? max(red_m[0], sink) : red_m[0];
  const float f = m == NO_KEY ? 0.0 : exp(m - mx);
  red_l[tid] = l * f;
  barrier();
  for (uint st = 32u; st > 0u; st >>= 1) {
    if (tid < st) red_l[tid] += red_l[tid + st];
    barrier();
  }
  const float denom = red_l[0] + (has_sink ? exp(sink - mx) : 0.0);
  const float inv = denom > 0.0 ? 1.0 / denom : 0.0;

  // o in chunks of 32 values: every invocation's scaled accumulators, summed per value; rotated V
  // rows: o rotated back in S (Σ p·(H v) = H Σ p·v) by invocation 0 once all of it is there.
  const uint oa = p.o_off + (t * p.n_head + h) * p.hdv;
  for (uint d0 = 0u; d0 < p.hdv; d0 += 32u) {
    for (uint k = 0u; k < 32u; ++k) red[tid * 32u + k] = d0 + k < p.hdv ? acc[d0 + k] * f : 0.0;
    barrier();
    if (tid < 32u && d0 + tid < p.hdv) {
      float sum = 0.0;
      for (uint r = 0u; r < 64u; ++r) sum += red[r * 32u + tid];
      s[oa + d0 + tid] = sum * inv;
    }
    barrier();
  }
  if (kv_rotated(true)) {
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) kv_hadamard(oa, p.hdv);
  }
}
