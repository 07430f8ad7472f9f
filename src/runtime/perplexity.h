// Perplexity over non-overlapping windows — the definition shared with train/ (train/README.md,
// train/reference_forward.py `ppl`):
//   tokens = tokenize(whole text, no BOS, no special-token parsing)
//   windows = tokens[0..CTX), tokens[CTX..2*CTX), ...   (a tail shorter than CTX is dropped)
//   each window runs in a fresh (reset) session from position 0; the logits at position p score the
//   token at p+1, so positions 1..CTX-1 of every window are scored (CTX-1 tokens per window)
//   NLL = -log_softmax(logits)[target] in double;  PPL = exp(mean NLL over all scored tokens)
//
//   auto r = perplexity_of_text(*model, text, {.n_ctx = 128}, on_window);
//   printf("%.4f\n", r->ppl);
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/model.h"

namespace strata {

// The default window when none is given: the model's training context, at most this.
inline constexpr int kPerplexityDefaultCtxCap = 4096;

struct PerplexityOptions {
  int n_ctx = 0;        // window length CTX; <= 0: min(model's context_length, kPerplexityDefaultCtxCap)
  int n_batch = 512;    // tokens per eval call (also capped so the [n_batch, n_vocab] logits stay <= 128 MiB)
  KvTypes kv = {};      // KV element types (f32: comparable with llama-perplexity's f32 runs)
  SeqKnobs knobs = {};  // per-sequence knobs (a profile's, runtime/profile.h)
};

// One finished window (for progress output).
struct PerplexityWindow {
  int index = 0;           // 0-based
  int n_windows = 0;       // total windows in this run
  double nll_sum = 0;      // summed NLL of this window's CTX-1 scored tokens
  double ppl = 0;          // this window's own perplexity
  double ppl_running = 0;  // perplexity over windows 0..index
  double seconds = 0;      // wall time of this window's evals
};

struct PerplexityResult {
  double ppl = 0;
  double nll = 0;  // mean NLL (nats per scored token)
  int n_ctx = 0;   // window length used
  int windows = 0;
  int64_t scored_tokens = 0;  // windows * (n_ctx - 1)
  int64_t n_tokens = 0;       // tokens in the whole text (before the tail is dropped)
  double seconds = 0;         // total wall time of evaluation
  double tokens_per_second() const { return seconds > 0 ? windows * double(n_ctx) / seconds : 0; }
};

using PerplexityProgress = std::function<void(const PerplexityWindow&)>;

// The window CTX that `opts` resolves to for `model` (the default rule above).
int perplexity_ctx(const Model& model, const PerplexityOptions& opts);

// Scores `tokens` (already tokenized). Errors: CTX < 2, n_batch < 1, fewer tokens than one window
// ("text has N tokens, fewer than one window of CTX"), session / eval errors (e.g. an id out of
// the model's vocabulary), non-finite logits.
Result<PerplexityResult> perplexity(const Model& model, std::span<const int32_t> tokens,
                                    const PerplexityOptions& opts, const PerplexityProgress& on_window = {});

// Tokenizes `text` with the model's tokenizer (no BOS/EOS, specials not parsed) and scores it.
Result<PerplexityResult> perplexity_of_text(const Model& model, std::string_view text,
                                            const PerplexityOptions& opts,
                                            const PerplexityProgress& on_window = {});

// -log softmax(logits)[target] computed in double (max-subtracted). logits: [n_vocab] f32.
// PRECOND: 0 <= target < n_vocab. Returns NaN/inf if the logits are not finite.
double token_nll(const float* logits, int n_vocab, int32_t target);

// Reads a whole file as bytes (text for tokenizing). Errors name the path and the reason
// (missing, a directory, unreadable).
Result<std::string> read_text_file(const std::string& path);

}  // namespace strata
