// Step 2 of kernels/attention_block.cpp for the tokens of one segment (one sequence): per token
// its q heads and its k head get the optional per-head RMSNorm, then RoPE from the token's
// cos/sin row (kernels/ops.h rope_cache, computed on the host: cache[2i] = cos, cache[2i+1] =
// sin); k and v rows are written into the sequence's K / V cache rows at the token's position
// (kv_rows.glsl: its slot in a linear, ring or paged cache; f32, f16, q8_0 or q4_0 values;
// rotated rows: q, k and v head slices Hadamard-rotated first, as the CPU block does). One
// invocation per (token, head): q heads 0..n_head−1 (rotated in place in S), then k heads,
// then v heads.
// S is the op's scratch: q [n][n_head·hd_k], k [n][n_kv·hd_k], v [n][n_kv·hd_v], the cos/sin
// rows [n][max(n_rot, 1)], the q / k norm weights, the block tables of paged caches; offsets are
// f32 indices.
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer S { float s[]; };
layout(std430, binding = 1) buffer KC { uint kc[]; };  // kv_rows.glsl
layout(std430, binding = 2) buffer VC { uint vc[]; };

layout(push_constant) uniform Params {
  uint n_tok;  // tokens of this segment
  uint t0;     // its first row in the batch
  uint pos0;   // the position of that row
  uint n_head;
  uint n_kv;
  uint hdk;
  uint hdv;
  uint n_rot;
  uint neox;
  uint q_off, k_off, v_off, rope_off, qn_off, kn_off;  // in S; qn / kn: ~0u when absent
  uint kc_off, vc_off;                                 // the rows' start in KC / VC (kv_rows.glsl)
  uint cap_k, cap_v;                                   // rows the caches hold
  uint flags;                                          // kv_rows.glsl
  float eps;
  uint kt_off, vt_off;  // paged: the block tables in S
  uint br_k, br_v;      // paged: rows per block
} p;

#define KV_WRITE
#include "kv_rows.glsl"

// RMSNorm of hd values at S[a..] by weights at S[wn..] (kernels/ops.cpp rms_norm: mean of
// squares, scale = 1 / sqrt(mean + eps), (x · scale) · w), in place.
void norm(uint a, uint wn) {
  float sum = 0.0;
  for (uint i = 0u; i < p.hdk; ++i) sum += s[a + i] * s[a + i];
  const float scale = 1.0 / sqrt(sum / float(p.hdk) + p.eps);
  for (uint i = 0u; i < p.hdk; ++i) s[a + i] = (s[a + i] * scale) * s[wn + i];
}

// kernels/ops.cpp rope_apply: pairs (2i, 2i+1), or (i, i + n_rot/2) for NEOX.
void rope(uint a, uint tab) {
  const uint half_rot = p.n_rot / 2u;
  for (uint i = 0u; i < half_rot; ++i) {
    const float c = s[tab + 2u * i], sn = s[tab + 2u * i + 1u];
    const uint ia = p.neox != 0u ? a + i : a + 2u * i;
    const uint ib = p.neox != 0u ? a + i + half_rot : a + 2u * i + 1u;
    const float x0 = s[ia], x1 = s[ib];
    s[ia] = x0 * c - x1 * sn;
    s[ib] = x0 * sn + x1 * c;
  }
}

void main() {
  const uint per_tok = p.n_head + 2u * p.n_kv;
  const uint id = gl_GlobalInvocationID.x;
  if (id >= p.n_tok * per_tok) return;
  const uint i = id / per_tok, h = id % per_tok;
  const uint t = p.t0 + i, pos = p.pos0 + i;
  const uint tab = p.rope_off + t * max(p.n_rot, 1u);
  if (h < p.n_head) {
    const uint a = p.q_off + (t * p.n_head + h) * p.hdk;
    if (p.qn_off != ~0u) norm(a, p.qn_off);
    rope(a, tab);
    if (kv_rotated(false)) kv_hadamard(a, p.hdk);  // q·k of rotated rows
  } else if (h < p.n_head + p.n_kv) {
    const uint hk = h - p.n_head;
    const uint a = p.k_off + (t * p.n_kv + hk) * p.hdk;
    if (p.kn_off != ~0u) norm(a, p.kn_off);
    rope(a, tab);
    if (kv_rotated(false)) kv_hadamard(a, p.hdk);
    kv_store(false, kv_slot(false, pos) * p.n_kv * p.hdk + hk * p.hdk, a, p.hdk);
  } else {
    const uint hk = h - p.n_head - p.n_kv;
    const uint a = p.v_off + (t * p.n_kv + hk) * p.hdv;
    if (kv_rotated(true)) kv_hadamard(a, p.hdv);
    kv_store(true, kv_slot(true, pos) * p.n_kv * p.hdv + hk * p.hdv, a, p.hdv);
  }
}
