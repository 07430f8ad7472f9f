// Token log-probabilities as OpenAI's `logprobs` reports them: log_softmax of a row of raw logits
// (before penalties, bias, top-k/p and temperature, as vLLM does), the chosen token's and the n
// most likely ones'. Computed only for requests that ask (CompletionParams::logprobs,
// prompt_logprobs): one pass over the row for the normaliser, one for the top n.
//
//   TokenLogprob lp = token_logprob(row, token, 5);  // lp.logprob, lp.top[0..4] (descending)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace strata {

struct TopLogprob {
  int32_t id = 0;
  float logprob = 0;
};

struct TokenLogprob {
  int32_t id = 0;               // the token (sampled, or the prompt's)
  float logprob = 0;            // log_softmax(row)[id]
  std::vector<TopLogprob> top;  // the n most likely tokens, descending (equal logits: lower id first)
};

// row: [n_vocab] raw logits; token in [0, n_vocab); n_top >= 0 (clamped to n_vocab). The
// normaliser is summed in double: the result is log_softmax within float rounding.
TokenLogprob token_logprob(std::span<const float> row, int32_t token, int n_top);

}  // namespace strata
