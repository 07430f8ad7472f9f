// Token sampling with llama.cpp's semantics and default chain order, OpenAI's logit bias and
// presence / frequency penalties in front:
//   logit bias -> repetition penalty -> presence/frequency -> top-k -> top-p -> min-p -> temperature -> dist
// temp <= 0 means greedy (argmax; ties go to the lowest id). Every stage is also a free function
// over a candidate list so it can be tested on its own.
//
//   Sampler s(params, n_vocab);
//   s.accept_prompt(prompt_tokens);          // repetition penalty sees the prompt too (llama-cli)
//   int32_t tok = s.sample(logits);          // logits: [n_vocab] f32, not modified
//   s.accept(tok);
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"

namespace strata {

constexpr uint32_t kSamplerRandomSeed = 0xFFFFFFFFu;  // like LLAMA_DEFAULT_SEED: seed from the clock

struct SamplerParams {
  float temp = 0.8f;            // <= 0: greedy
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int32_t repeat_last_n = 64;   // tokens of history penalised; 0: off
  // OpenAI's penalties, over the tokens generated so far (not the prompt): a token generated c > 0
  // times loses presence_penalty + c * frequency_penalty from its logit. 0: off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Added to the token's logit before every stage (OpenAI's logit_bias; -100 all but bans it).
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint32_t seed = kSamplerRandomSeed;
  size_t min_keep = 1;  // top-p / min-p keep at least this many candidates
};

// Checks ranges (finite temp, 0 < top_p, 0 <= min_p <= 1, repeat_penalty > 0, repeat_last_n >= 0,
// presence / frequency penalties in [-2, 2], finite biases for ids >= 0 — the ids' upper bound is the
// vocabulary, checked where it is known); the error names the parameter and its value.
Status sampler_params_validate(const SamplerParams& p);

struct Candidate {
  int32_t id;
  float logit;
  float p;  // filled by stages that need probabilities (softmax over the current list)
};

// A candidate list; `sorted` = descending by logit.
struct Candidates {
  std::vector<Candidate> data;
  bool sorted = false;
};

// Each stage keeps at least one candidate.
void candidates_from_logits(const float* logits, int32_t n_vocab, Candidates* c);
// Multiply logits <= 0 by `penalty`, divide positive ones by it, for ids in `counts`.
void sample_penalties(Candidates* c, const std::unordered_map<int32_t, int>& counts, float penalty);
// Subtract presence + count * frequency from the logits of ids in `counts`.
void sample_presence_frequency(Candidates* c, const std::unordered_map<int32_t, int>& counts, float presence,
                               float frequency);
// Add each bias to its id's logit; c must be the full list in id order (candidates_from_logits).
void sample_logit_bias(Candidates* c, std::span<const std::pair<int32_t, float>> bias);
void sample_top_k(Candidates* c, int32_t k);
void sample_softmax(Candidates* c);  // fills p (f32 expf, max-subtracted), keeps order
void sample_top_p(Candidates* c, float p, size_t min_keep);
void sample_min_p(Candidates* c, float p, size_t min_keep);
void sample_temperature(Candidates* c, float temp);
// Draws from softmax(logits) with one uniform double from rng (as llama.cpp's dist sampler).
int32_t sample_dist(Candidates* c, std::mt19937* rng);
int32_t sample_greedy(const float* logits, int32_t n_vocab);

// Limits which tokens may come next (a grammar: runtime/grammar_constraint.h). When the
// constraint's mask for its state is at hand (mask_ready()), the sampler draws once from the
// biased, penalised list of the allowed tokens (built from mask_bits(), or the whole list through
// filter()). Otherwise it first draws as if unconstrained and keeps the token when allows() says so;
// else (llama.cpp's order) it draws again from the allowed tokens (greedy: the best allowed; a
// constraint without mask bits has the best few candidates tried one by one first). Both draw from
// the same distribution (a rejected draw is redrawn from the allowed tokens).
// Whether token `id` is set in a constraint's mask bits (TokenConstraint::mask_bits's layout).
inline bool mask_allows(std::span<const uint64_t> bits, int32_t id) {
  const auto w = static_cast<size_t>(id) >> 6;
  return id >= 0 && w < bits.size() && ((bits[w] >> (id & 63)) & 1);
}

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual bool allows(int32_t token) = 0;
  virtual void filter(Candidates* c) = 0;  // keeps only allowed candidates (maybe none)
  virtual bool mask_ready() = 0;           // filter() is a lookup now
  // The tokens allowed now as bits (token t: bit t % 64 of word t / 64; tokens past the words are not
  // allowed), computed when not at hand; empty when the constraint has no mask (the sampler then
  // filters its full list with filter()).
  virtual std::span<const uint64_t> mask_bits() { return {}; }
  virtual void accept(int32_t token) = 0;  // the sampled token (an allowed one)
  virtual bool can_end() const = 0;        // end of generation is allowed now
  virtual bool complete() const = 0;       // nothing but the end can follow
};

class Sampler {
 public:
  Sampler(const SamplerParams& params, int32_t n_vocab);

  // logits: [n_vocab] f32. Returns a token id in [0, n_vocab), or -1 when a constraint allows no
  // token at all.
  int32_t sample(const float* logits);
  // Every later sample() draws only tokens c allows; accept() advances it.
  void set_constraint(std::unique_ptr<TokenConstraint> c) { constraint_ = std::move(c); }
  TokenConstraint* constraint() const { return constraint_.get(); }
  // Record a generated token: the repetition-penalty history (the last repeat_last_n are kept)
  // and the presence / frequency counts.
  void accept(int32_t token);
  // Prompt tokens: the repetition-penalty history only.
  void accept_prompt(std::span<const int32_t> tokens);
  void reset();  // clear history and re-seed

  const SamplerParams& params() const { return params_; }
  uint32_t seed() const { return seed_; }  // the effective seed (resolved if random)
  // The candidates the chain would draw from, after all filters (for tests and debugging).
  const Candidates& last_candidates() const { return cands_; }

 private:
  SamplerParams params_;
  int32_t n_vocab_;
  uint32_t seed_;
  std::mt19937 rng_;
  std::deque<int32_t> history_;
  std::unordered_map<int32_t, int> counts_;      // in history_
  std::unordered_map<int32_t, int> gen_counts_;  // generated tokens (presence / frequency)
  Candidates cands_;
  std::unique_ptr<TokenConstraint> constraint_;
  void remember(int32_t token);  // history_ and counts_
  // Candidates with bias and penalties applied; only the tokens set in `allowed` when given.
  void prepare(const float* logits, std::span<const uint64_t> allowed = {});
  void prepare_constrained(const float* logits);  // the constraint's tokens only
  int32_t draw();                                 // the rest of the chain over cands_
};

}  // namespace strata
