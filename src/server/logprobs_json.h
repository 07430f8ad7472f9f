// OpenAI's `logprobs` objects, built from the engine's TokenLogprob entries (runtime/logprobs.h):
//   completions: {"tokens": [..], "token_logprobs": [..], "top_logprobs": [{piece: lp, ..}, ..],
//                 "text_offset": [..]}  (an echoed prompt's first token has null logprob and top)
//   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
//                 "bytes"}, ..]}, ..]}
// Tokens are shown as their pieces (control tokens' text included; text_offset counts only what the
// response's text holds of them, none for a control token); a piece that ends inside a UTF-8
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

  // Completions' echo: the prompt's first token, which has no logprob (nothing precedes it), and
  // `lead`: bytes of the prompt's pieces the echoed text does not hold (SentencePiece's space
  // prefix), so that text offsets index the text.
  void add_unscored(int32_t id, size_t lead = 0);
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
  int64_t offset_ = 0;  // completions' text_offset: bytes of the pieces before (less an echo's lead)
  nlohmann::json j_;
};

}  // namespace strata::server
