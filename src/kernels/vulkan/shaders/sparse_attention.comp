// DeepSeek-V4's attention core (kernels/sparse_attention.h) for one sequence's tokens: token i at
// position pos = pos0 + i and query head h attend, with one shared K = V row per key, the window
// rows max(0, pos − window + 1) .. pos of W (slot j mod cap_w when a ring), then compressed rows
// of C: all visible ones 0 .. (pos + 1) / ratio − 1 (mode 1), or the rows I[sel_off + i·sel_stride
// ..] (I[seln_off + i] of them, mode 2); mode 0: none. One softmax with the head's sink:
//   s_j = scale · q·k_j,  M = max(max_j s_j, sink),
//   o = Σ_j e^(s_j − M) v_j / (e^(sink − M) + Σ_j e^(s_j − M))   (no sink: no sink term).
// One workgroup per (token, head); keys in blocks of 64 (the CPU core's key block): invocation l
// scores key l of the block, then every invocation takes the block's max into the running max
// (rescaling what it holds) and adds the block's weighted rows to the output values it owns
// (d ≡ l mod 64). q, o and sinks are f32 rows of S (offsets: f32 indices).
#version 450

#define MAX_HD 1024
#define PER (MAX_HD / 64)
#define NO_KEY -3.402823466e38  // m before the first key (exp(NO_KEY − s) is 0)

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer S { float s[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer C { float c[]; };
layout(std430, binding = 3) readonly buffer I { uint idx[]; };

layout(push_constant) uniform Params {
  uint n_tok;
  uint pos0;
  uint n_head;
  uint hd;
  uint window;
  uint ratio;
  uint mode;  // 0: window only, 1: every visible compressed row, 2: the selected ones
  float scale;
  uint q_off, o_off, sink_off;  // sink_off: ~0u when absent
  uint w_off, cap_w, w_ring;
  uint c_off, cap_c, c_ring;
  uint sel_off, seln_off, sel_stride;
} p;

shared float qs[MAX_HD];
shared float sc[64];
shared uint row_at[64];  // the key's first value in W (bit 31 clear) or C (bit 31 set)

void main() {
  const uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationID.x;
  const uint pos = p.pos0 + i;
  const uint qa = p.q_off + (i * p.n_head + h) * p.hd;
  for (uint d = tid; d < p.hd; d += 64u) qs[d] = s[qa + d];
  barrier();

  const uint n_win = p.window > 0u && pos + 1u > p.window ? p.window : pos + 1u;
  const uint j0 = pos + 1u - n_win;
  const uint n_comp = p.mode == 1u ? (pos + 1u) / p.ratio : p.mode == 2u ? idx[p.seln_off + i] : 0u;
  const uint total = n_win + n_comp;
  const bool has_sink = p.sink_off != ~0u;
  float m = has_sink ? s[p.sink_off + h] : NO_KEY;
  float l = has_sink ? 1.0 : 0.0;
  float acc[PER];
  for (uint a = 0u; a < PER; ++a) acc[a] = 0.0;

  for (uint k0 = 0u; k0 < total; k0 += 64u) {
    const uint nk = min(64u, total - k0);
    if (tid < nk) {
      const uint k = k0 + tid;
      uint at;
      float dot = 0.0;
      if (k < n_win) {
        const uint j = j0 + k;
        at = p.w_off + (p.w_ring != 0u ? j % p.cap_w : j) * p.hd;
        for (uint d = 0u; d < p.hd; ++d) dot += qs[d] * w[at + d];
      } else {
        const uint cj = k - n_win;
        const uint j = p.mode == 1u ? cj : idx[p.sel_off + i * p.sel_stride + cj];
        const uint a0 = p.c_off + (p.c_ring != 0u ? j % p.cap_c : j) * p.hd;
        for (uint d = 0u; d < p.hd; ++d) dot += qs[d] * c[a0 + d];
        at = a0 | 0x80000000u;
      }
      sc[tid] = p.scale * dot;
      row_at[tid] = at;
    }
    barrier();
    float mb = NO_KEY;
    for (uint j = 0u; j < nk; ++j) mb = max(mb, sc[j]);
    if (mb > m) {  // the running max grows: rescale what was accumulated
      const float f = m == NO_KEY ? 0.0 : exp(m - mb);
      l *= f;
      for (uint a = 0u; a < PER; ++a) acc[a] *= f;
      m = mb;
    }
    for (uint j = 0u; j < nk; ++j) {
      const float e = exp(sc[j] - m);
      l += e;
      const uint at = row_at[j];
      const bool in_c = (at & 0x80000000u) != 0u;
      const uint base = at & 0x7fffffffu;
      for (uint a = 0u; a < PER; ++a) {
        const uint d = tid + 64u * a;
        if (d < p.hd) acc[a] += e * (in_c ? c[base + d] : w[base + d]);
      }
    }
    barrier();
  }

  const float inv = l > 0.0 ? 1.0 / l : 0.0;  // no keys and no sink: 0
  const uint oa = p.o_off + (i * p.n_head + h) * p.hd;
  for (uint a = 0u; a < PER; ++a) {
    const uint d = tid + 64u * a;
    if (d < p.hd) s[oa + d] = acc[a] * inv;
  }
}
