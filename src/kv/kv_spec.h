// KvSpec: the one description of a sequence's KV parts (vLLM's KVCacheSpec is the model). Each
// architecture says once, per layer, which parts it keeps — kind, width, element type, rows per
// token or a ring — and everything else asks the spec: KvCache allocates from it, the memory plan
// (`strata plan`, `inspect --kv`) prices it, and a paged pool can later hand out blocks by it.
//
//   full        one row per position (K, V, an MLA latent)                 rows = n_ctx
//   window      the last `window` positions as a ring; when a step writes its tokens before its
//               first query reads, the ring holds them too                 rows = min(n_ctx, window - 1 +
//               n_batch) (token by token, as V4.1's reference path runs: window rows)
//   compressed  one row per `ratio` positions (CSA / HCA / CSA2 entries)   rows = ceil(n_ctx / ratio)
//   indexer     indexer keys, one row per `ratio` positions                rows = ceil(n_ctx / ratio)
//   state       fixed rolling state (a compressor's partial block), always f32 whatever the KV type
// KvPartSpec::rows() is the only KV-size formula in strata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_type.h"

namespace strata {

enum class KvPartKind : uint8_t { full, window, compressed, indexer, state };
const char* kv_part_kind_name(KvPartKind k);

struct KvPartSpec {
  KvPartKind kind = KvPartKind::full;
  std::string name;    // the part's name in a layer and the bill's line ("k", "v", "window", "csa", ...)
  std::string what;    // what it holds, for the bill
  int64_t width = 0;   // values per row
  int ratio = 1;       // full / compressed / indexer: one row per `ratio` positions
  int64_t window = 0;  // window: positions a query sees, itself included
  bool step_in_ring = true;   // window: the ring also holds the other tokens of a step
  int64_t state_rows = 0;     // state: rows
  KvType type = KvType::f32;  // storage type of the rows
  bool has_native = false;    // the reference implementation's own storage type is known
  KvType native = KvType::f32;

  bool grows() const {
    return kind == KvPartKind::full || kind == KvPartKind::compressed || kind == KvPartKind::indexer;
  }
  // Rows one sequence of n_ctx positions holds when a step carries up to n_batch tokens.
  int64_t rows(int64_t n_ctx, int64_t n_batch) const;
  // Addressed modulo rows (a window shorter than the context).
  bool ring(int64_t n_ctx, int64_t n_batch) const;
  // The type a row is stored in when the KV type is t (state parts stay f32).
  KvType stored_as(KvType t) const { return kind == KvPartKind::state ? KvType::f32 : t; }
  uint64_t row_bytes(KvType t) const { return kv_row_bytes(stored_as(t), width); }
  uint64_t bytes(KvType t, int64_t n_ctx, int64_t n_batch) const;
  double bytes_per_token(KvType t) const;  // growth per position; 0 for windows and state
  bool operator==(const KvPartSpec&) const = default;
};

struct KvLayerSpec {
  std::vector<KvPartSpec> parts;
};

struct KvSpec {
  std::vector<KvLayerSpec> layers;  // [n_layer]

  int n_layer() const { return static_cast<int>(layers.size()); }
  // One sequence, every part at type t (state f32) / at each part's own type.
  uint64_t bytes(KvType t, int64_t n_ctx, int64_t n_batch) const;
  uint64_t bytes(int64_t n_ctx, int64_t n_batch) const;
};

// The type a part is stored in under the KV types t — the one mapping from -ctk / -ctv /
// --kv-type-index to parts, which the caches allocate and the plan prices: "v" parts t.v, indexer
// keys t.index_type(), state f32, every other part t.k (K, window rings, compressed rows).
KvType kv_part_type(const KvPartSpec& p, const KvTypes& t);
// The spec with every part's type set so.
KvSpec kv_spec_typed(KvSpec s, const KvTypes& t);

// Builders the architectures share.
KvPartSpec kv_part_full(std::string name, std::string what, int64_t width);
KvPartSpec kv_part_window(std::string name, std::string what, int64_t width, int64_t window);
KvPartSpec kv_part_every(KvPartKind kind, std::string name, std::string what, int64_t width, int ratio);
KvPartSpec kv_part_state(std::string name, std::string what, int64_t width, int64_t rows);

// A standard attention layer: K and V of n_head_kv heads, over all positions or a window (> 0).
KvLayerSpec kv_layer_attention(int n_head_kv, int head_dim_k, int head_dim_v, int window);

}  // namespace strata
