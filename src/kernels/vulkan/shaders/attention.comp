// The attention of one segment's tokens (kernels/attention_core.h): for token i at position
// pos = pos0 + i and query head h (kv head h / (n_head / n_kv)), over the cache rows j of its
// causal / sliding-window range max(0, pos − window + 1) .. pos (window 0: from 0),
//   s_j = scale · q·k_j,  M = max(max_j s_j, sink),
//   o = Σ_j e^(s_j − M) v_j / (e^(sink − M) + Σ_j e^(s_j − M))   (no sink: no sink term).
// One workgroup per (token, head); invocation l takes keys j ≡ l (mod 64) with an online
// softmax (its own max, denominator and accumulator), and the 64 partial results are combined
// at the end. q and o are rows of S (f32; offsets are f32 indices), sinks S[sink_off..]. K / V
// rows are f32 or f16 (two values per word), read as f32.
#version 450

#define MAX_HD 256
#define NO_KEY -3.402823466e38  // m before the first key (exp(NO_KEY − s) is 0)

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer S { float s[]; };
layout(std430, binding = 1) readonly buffer KC { uint kc[]; };  // f32 bits, or f16 pairs
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
  uint ring;  // bit 0: K is a ring, bit 1: V; bit 2: K rows are f16, bit 3: V
} p;

float kval(uint i) {
  return (p.ring & 4u) != 0u ? unpackHalf2x16(kc[i >> 1])[i & 1u] : uintBitsToFloat(kc[i]);
}
float vval(uint i) {
  return (p.ring & 8u) != 0u ? unpackHalf2x16(vc[i >> 1])[i & 1u] : uintBitsToFloat(vc[i]);
}

shared float qs[MAX_HD];
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

  const uint j0 = p.window > 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u;
  float m = NO_KEY, l = 0.0;
  float acc[MAX_HD];
  for (uint d = 0u; d < p.hdv; ++d) acc[d] = 0.0;
  for (uint j = j0 + tid; j <= pos; j += 64u) {
    const uint ks = (p.ring & 1u) != 0u ? j % p.cap_k : j;
    const uint vs = (p.ring & 2u) != 0u ? j % p.cap_v : j;
    const uint ka = p.kc_off + ks * p.n_kv * p.hdk + hk * p.hdk;
    const uint va = p.vc_off + vs * p.n_kv * p.hdv + hk * p.hdv;
    float dot = 0.0;
    for (uint d = 0u; d < p.hdk; ++d) dot += qs[d] * kval(ka + d);
    const float sc = p.scale * dot;
    if (sc > m) {
      const float f = exp(m - sc);  // 0 for the first key
      l *= f;
      for (uint d = 0u; d < p.hdv; ++d) acc[d] *= f;
      m = sc;
    }
    const float e = exp(sc - m);
    l += e;
    for (uint d = 0u; d < p.hdv; ++d) acc[d] += e * vval(va + d);
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

  // o in chunks of 32 values: every invocation's scaled accumulators, summed per value.
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
}
