// Hyper-parameters read from `<arch>.*` GGUF metadata, plus per-layer attributes.
//
// One struct for all architectures: the common transformer / MoE numbers, and per-layer
// attributes (attention kind, window, compress ratio, n_head_kv) so that a layer loop never
// asks "which architecture is this". Architecture files fill the arch-specific defaults
// (e.g. gpt-oss's sliding-window pattern) after hparams_read_common().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "kernels/ops.h"

namespace strata {

enum class AttnKind {
  attn_kind_full,     // causal over all past positions
  attn_kind_sliding,  // causal over the last `window` positions (incl. itself)
  attn_kind_csa,      // deepseek4: window + indexer-selected compressed entries (ratio 4)
  attn_kind_hca,      // deepseek4: window + all compressed entries (ratio 128)
};
const char* attn_kind_name(AttnKind k);

struct LayerParams {
  AttnKind attn_kind = AttnKind::attn_kind_full;
  int n_head = 0;
  int n_head_kv = 0;
  int window = 0;          // sliding window in positions (0: none)
  int compress_ratio = 0;  // deepseek4 (0: none)
  int n_ff_exp = 0;        // expert width of this layer (0: dense layer)
};

struct HParams {
  std::string arch;  // general.architecture
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;   // attention.key_length, default n_embd / n_head
  int head_dim_v = 0;   // attention.value_length, default head_dim_k
  int n_vocab = 0;      // rows of token_embd (set by the binder) or vocab_size
  int n_ctx_train = 0;  // context_length
  float rms_eps = 1e-6f;

  // rope
  RopeStyle rope_style = RopeStyle::rope_style_norm;
  RopeParams rope;  // n_rot, freq_base, YaRN from rope.scaling.*

  // feed-forward
  int n_ff = 0;      // feed_forward_length (dense)
  int n_expert = 0;  // 0: dense model
  int n_expert_used = 0;
  int n_ff_exp = 0;        // expert_feed_forward_length
  int n_ff_shexp = 0;      // expert_shared_feed_forward_length (0: none)
  int sliding_window = 0;  // attention.sliding_window (0: none)

  std::vector<LayerParams> layers;  // [n_layer]

  bool is_moe() const { return n_expert > 0; }
};

// Reads the keys every architecture here shares; errors name the missing / invalid key
// ("qwen3moe.attention.head_count: missing"). Fills layers[] with full attention.
Result<HParams> hparams_read_common(const GgufFile& f);

// Validates the cross-field invariants (divisibility, ranges); the error names the field.
Status hparams_validate(const HParams& hp);

}  // namespace strata
