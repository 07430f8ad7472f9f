// Step 2 of kernels/attention_block.cpp for the tokens of one segment (one sequence): per token
// its q heads and its k head get the optional per-head RMSNorm, then RoPE from the token's
// cos/sin row (kernels/ops.h rope_cache, computed on the host: cache[2i] = cos, cache[2i+1] =
// sin); k and v rows are written into the sequence's K / V cache rows at the token's position
// (kv_rows.glsl: its slot in a linear, ring or paged cache; values of any KV type;
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

// Each step below has one call site (lavapipe compiles every inlined copy of kv_store).
void main() {
  const uint per_tok = p.n_head + 2u * p.n_kv;
  const uint id = gl_GlobalInvocationID.x;
  if (id >= p.n_tok * per_tok) return;
  const uint i = id / per_tok, h = id % per_tok;
  const uint t = p.t0 + i, pos = p.pos0 + i;
  const bool is_q = h < p.n_head, is_v = h >= p.n_head + p.n_kv;
  const uint hk = is_q ? 0u : is_v ? h - p.n_head - p.n_kv : h - p.n_head;
  const uint hd = is_v ? p.hdv : p.hdk;
  const uint a = is_q ? p.q_off + (t * p.n_head + h) * hd
                      : (is_v ? p.v_off : p.k_off) + (t * p.n_kv + hk) * hd;
  if (!is_v) {
    const uint wn = is_q ? p.qn_off : p.kn_off;
    if (wn != ~0u) norm(a, wn);
    rope(a, p.rope_off + t * max(p.n_rot, 1u));
  }
  if (kv_rotated(is_v)) kv_hadamard(a, hd);  // q too: q·k of rotated rows
  if (!is_q) kv_store(is_v, kv_slot(is_v, pos) * p.n_kv * hd + hk * hd, a, hd);
}
