// One request through the serving engine: prompt -> tokens (BOS per the vocab's add_bos) -> a
// one-slot Engine (runtime/engine.h) over the caller's session, or the caller's own engine
// (`strata run`: Engine::for_model, paged KV pool and prefix cache as serve's), stepped on this
// thread: prefill, then sample/decode until n_predict tokens, an end-of-generation token, or a
// full context. The engine's loop is the only generation loop; text is streamed through a callback
// in complete UTF-8 characters.
//
//   GenerateOptions o; o.n_predict = 64; o.sampling.temp = 0;
//   auto stats = generate(*model, *session, model->tokenizer(), model->n_vocab(), "Once upon", o,
//                         [](std::string_view text) { fwrite(...); return true; });
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/arch.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "text/tokenizer.h"

namespace strata {

struct GenerateOptions {
  int n_predict = 128;  // tokens to generate; < 0: until end of generation or a full context
  SamplerParams sampling;
  bool ignore_eos = false;      // keep going past end-of-generation tokens (benchmarks)
  bool parse_special = true;    // "<|im_start|>" in the prompt becomes its control token
  bool special_pieces = false;  // print control tokens' text in the output
  SeqKnobs knobs;  // engine overloads: the sequence's knobs (the session overloads: the session's)
};

enum class StopReason { n_predict, eog, ctx_full, callback };
const char* stop_reason_name(StopReason r);

struct GenerateStats {
  int n_prompt = 0;     // prompt tokens evaluated (prefill)
  int n_cached = 0;     // prompt tokens whose KV came from the prefix cache (n_prompt + n_cached: the prompt)
  int n_gen = 0;        // tokens sampled (the first comes from the prefill logits)
  int n_decode = 0;     // single-token decode evals
  double prompt_s = 0;  // prefill wall time
  double decode_s = 0;  // total wall time of the decode evals
  double sample_s = 0;  // total time in the sampler
  StopReason stop = StopReason::n_predict;
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;  // generated ids (the end-of-generation token included)

  double prompt_tps() const { return prompt_s > 0 ? n_prompt / prompt_s : 0; }
  double gen_tps() const { return decode_s > 0 ? n_decode / decode_s : 0; }
};

// Return false to stop generating.
using TextCallback = std::function<bool(std::string_view text)>;

// `runner` evaluates `session`'s batches (the Model that made it, or a test double); the session
// starts afresh (reset). Errors: empty prompt, prompt not shorter than the context ("prompt is N
// tokens but the context ... is C"), bad sampler parameters, model eval errors.
Result<GenerateStats> generate(const BatchRunner& runner, Session& session, const Tokenizer& tok,
                               int32_t n_vocab, std::string_view prompt, const GenerateOptions& opts,
                               const TextCallback& on_text);
// The same from token ids (models without a tokenizer): no text, no end-of-generation check;
// stats.tokens holds the generated ids.
Result<GenerateStats> generate_ids(const BatchRunner& runner, Session& session, int32_t n_vocab,
                                   std::vector<int32_t> prompt, const GenerateOptions& opts,
                                   const std::function<bool(int32_t)>& on_token);

// The same through the caller's engine (one whose manual_step is set; its n_batch prompt tokens
// per turn): `strata run` on the paged KV pool. Errors as above, plus the engine's (a prompt whose
// KV the budget cannot hold names its need and the budget).
class Engine;
Result<GenerateStats> generate(Engine& engine, const Tokenizer& tok, std::string_view prompt,
                               const GenerateOptions& opts, const TextCallback& on_text);
Result<GenerateStats> generate_ids(Engine& engine, std::vector<int32_t> prompt, const GenerateOptions& opts,
                                   const std::function<bool(int32_t)>& on_token);

// Scoring through the same engine: `tokens` (at most the session's context) evaluated from a fresh
// session in forward steps of `chunk` tokens, every position's logits handed to on_rows(pos0,
// rows [n][n_vocab]) as its step completes (`strata logits`, perplexity). Batch invariance makes
// the rows the same bits for every chunk size. on_rows returning false stops (an error).
using LogitRowsCallback = std::function<bool(int64_t pos0, std::span<const float> rows)>;
Status score(const BatchRunner& runner, Session& session, int32_t n_vocab, std::span<const int32_t> tokens,
             int chunk, const LogitRowsCallback& on_rows);

}  // namespace strata
