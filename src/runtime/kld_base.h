// llama-perplexity's saved reference log-probabilities (`--kl-divergence-base FILE`), so that
// `strata kld --kl-divergence-base FILE -m MODEL` measures a model against logits llama.cpp (or
// another strata run) computed, without the reference model. The file, as llama.cpp v0.5.0
// writes it: "_logits_", u32 n_ctx, i32 n_vocab, i32 n_chunk, i32 tokens[n_ctx · n_chunk] (the
// text as the reference tokenized it, BOS first when its model adds one), then per chunk the rows
// of positions n_ctx/2 .. n_ctx-2, each 2·⌈n_vocab/2⌉ + 4 uint16: float scale, float min_log_prob,
// then per token q with log P(v) = min_log_prob + scale · q (logits more than 16 below the row's
// max are clamped there).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "runtime/kl_divergence.h"

namespace strata {

struct KldBase {
  int n_ctx = 0, n_vocab = 0, n_chunk = 0;
  std::vector<int32_t> tokens;  // [n_chunk][n_ctx]
  std::vector<uint16_t> rows;   // [n_chunk][rows_per_chunk()][row_stride()]
  int rows_per_chunk() const { return n_ctx - 1 - n_ctx / 2; }
  size_t row_stride() const { return 2 * ((static_cast<size_t>(n_vocab) + 1) / 2) + 4; }
  const uint16_t* row(int chunk, int j) const {
    return rows.data() + (static_cast<size_t>(chunk) * rows_per_chunk() + j) * row_stride();
  }
};

// Errors name the file and what is wrong (magic, sizes, a truncated file).
Result<KldBase> read_kld_base(const std::string& path);
// The same layout from logits (tests; [n_chunk][rows_per_chunk][n_vocab] rows of positions n_ctx/2 ..).
Status write_kld_base(const std::string& path, int n_ctx, int n_vocab, const std::vector<int32_t>& tokens,
                      const std::vector<float>& logits);

// `m` against the base (kl_divergence.cpp: the same engine scoring and summary as kl_divergence),
// chunk by chunk from a fresh session (its first token replaced by the
// model's BOS when it adds one, as llama-perplexity evaluates), positions n_ctx/2 .. n_ctx-2:
// KLD over the base's entries above e^-16 (llama.cpp's rule), top-1 agreement, PPL of both.
// opts.n_ctx is ignored (the file's); routing stays empty. Errors: another vocabulary size, a
// token outside the vocabulary, non-finite logits.
Result<KldResult> kl_divergence_vs_base(const Model& m, const KldBase& base, const KldOptions& opts,
                                        const KldProgress& progress = {});

}  // namespace strata
