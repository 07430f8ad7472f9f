#include "kv/kv_spec.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace strata {

const char* kv_part_kind_name(KvPartKind k) {
  switch (k) {
    case KvPartKind::full:
      return "full";
    case KvPartKind::window:
      return "window";
    case KvPartKind::compressed:
      return "compressed";
    case KvPartKind::indexer:
      return "indexer";
    case KvPartKind::state:
      return "state";
  }
  return "?";
}

int64_t KvPartSpec::rows(int64_t n_ctx, int64_t n_batch) const {
  switch (kind) {
    case KvPartKind::full:
    case KvPartKind::compressed:
    case KvPartKind::indexer:
      return (n_ctx + ratio - 1) / ratio;
    case KvPartKind::window:
      return std::min(n_ctx, step_in_ring ? window - 1 + n_batch : window);
    case KvPartKind::state:
      return state_rows;
  }
  return 0;
}

bool KvPartSpec::ring(int64_t n_ctx, int64_t n_batch) const {
  return kind == KvPartKind::window && rows(n_ctx, n_batch) < n_ctx;
}

uint64_t KvPartSpec::bytes(KvType t, int64_t n_ctx, int64_t n_batch) const {
  return static_cast<uint64_t>(rows(n_ctx, n_batch)) * row_bytes(t);
}

double KvPartSpec::bytes_per_token(KvType t) const {
  if (!grows()) return 0.0;
  return static_cast<double>(row_bytes(t)) / ratio;
}

uint64_t KvSpec::bytes(KvType t, int64_t n_ctx, int64_t n_batch) const {
  uint64_t b = 0;
  for (const KvLayerSpec& l : layers)
    for (const KvPartSpec& p : l.parts) b += p.bytes(t, n_ctx, n_batch);
  return b;
}

uint64_t KvSpec::bytes(int64_t n_ctx, int64_t n_batch) const {
  uint64_t b = 0;
  for (const KvLayerSpec& l : layers)
    for (const KvPartSpec& p : l.parts) b += p.bytes(p.type, n_ctx, n_batch);
  return b;
}

KvType kv_part_type(const KvPartSpec& p, const KvTypes& t) {
  if (p.kind == KvPartKind::state) return KvType::f32;
  if (p.kind == KvPartKind::indexer) return t.index_type();
  return p.name == "v" ? t.v : t.k;
}

KvSpec kv_spec_typed(KvSpec s, const KvTypes& t) {
  for (KvLayerSpec& l : s.layers)
    for (KvPartSpec& p : l.parts) p.type = kv_part_type(p, t);
  return s;
}

namespace {

KvPartSpec part(KvPartKind kind, std::string name, std::string what, int64_t width) {
  KvPartSpec p;
  p.kind = kind;
  p.name = std::move(name);
  p.what = std::move(what);
  p.width = width;
  return p;
}

}  // namespace

KvPartSpec kv_part_full(std::string name, std::string what, int64_t width) {
  return kv_part_every(KvPartKind::full, std::move(name), std::move(what), width, 1);
}

KvPartSpec kv_part_window(std::string name, std::string what, int64_t width, int64_t window) {
  KvPartSpec p = part(KvPartKind::window, std::move(name), std::move(what), width);
  p.window = window;
  return p;
}

KvPartSpec kv_part_every(KvPartKind kind, std::string name, std::string what, int64_t width, int ratio) {
  KvPartSpec p = part(kind, std::move(name), std::move(what), width);
  p.ratio = ratio;
  return p;
}

KvPartSpec kv_part_state(std::string name, std::string what, int64_t width, int64_t rows) {
  KvPartSpec p = part(KvPartKind::state, std::move(name), std::move(what), width);
  p.state_rows = rows;
  return p;
}

KvLayerSpec kv_layer_attention(int n_head_kv, int head_dim_k, int head_dim_v, int window) {
  KvLayerSpec l;
  if (n_head_kv <= 0) return l;  // a layer without attention memory
  char what[96];
  const char* span = window > 0 ? "sliding-window" : "full-attention";
  std::snprintf(what, sizeof what, "%s K (%d kv heads x %d)", span, n_head_kv, head_dim_k);
  const int64_t wk = int64_t{n_head_kv} * head_dim_k, wv = int64_t{n_head_kv} * head_dim_v;
  if (window > 0) {
    l.parts.push_back(kv_part_window("k", what, wk, window));
    std::snprintf(what, sizeof what, "%s V (%d kv heads x %d)", span, n_head_kv, head_dim_v);
    l.parts.push_back(kv_part_window("v", what, wv, window));
  } else {
    l.parts.push_back(kv_part_full("k", what, wk));
    std::snprintf(what, sizeof what, "%s V (%d kv heads x %d)", span, n_head_kv, head_dim_v);
    l.parts.push_back(kv_part_full("v", what, wv));
  }
  return l;
}

}  // namespace strata
