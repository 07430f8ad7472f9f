// OpenAI's `logprobs` objects, built from the engine's TokenLogprob entries (runtime/logprobs.h):
//   completions: {"tokens": [..], "token_logprobs": [..], "top_logprobs": [{piece: lp, ..}, ..],
//                 "text_offset": [..]}  (an echoed prompt's first token has null logprob and top)
//   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
//                 "bytes"}, ..]}, ..]}
// Tokens are shown as their pieces (control tokens' text included); a piece that ends inside a UTF-8
// character is written with U+FFFD, its exact bytes are in chat's "bytes".
//
//   LogprobsJson lp(tok, chat);
//   lp.add(ev.logprobs);           // for each event (streamed: take() after each)
//   json j = lp.take();            // the object for the entries added since the last take
#pragma once

#include <nlohmann/json.hpp>
#include <span>

#include "runtime/logprobs.h"
#include "text/tokenizer.h"

namespace strata::server {

class LogprobsJson {
 public:
  LogprobsJson(const Tokenizer& tok, bool chat) : tok_(tok), chat_(chat) { clear(); }

  // Completions' echo: the prompt's first token, which has no logprob (nothing precedes it).
  void add_unscored(int32_t id);
  void add(std::span<const TokenLogprob> entries);
  bool empty() const { return n_ == 0; }
  // The object for the entries added since the last take (text offsets keep counting).
  nlohmann::json take();

 private:
  void clear();
  void add_token(int32_t id, const TokenLogprob* lp);
  const Tokenizer& tok_;
  bool chat_;
  size_t n_ = 0;
  size_t offset_ = 0;  // completions' text_offset: bytes of the pieces before
  nlohmann::json j_;
};

}  // namespace strata::server
