// Shared half of the BPE and SentencePiece tokenizers: owns the Vocab, answers the metadata
// queries of Tokenizer, and runs the special-token partition + BOS/EOS around encode_fragment().
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"
#include "text/vocab.h"

namespace strata::text {

class VocabTokenizer : public Tokenizer {
 public:
  VocabTokenizer(Vocab vocab, std::string model, std::string pre)
      : vocab_(std::move(vocab)), model_(std::move(model)), pre_(std::move(pre)) {}

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;

  int32_t n_vocab() const override { return vocab_.n(); }
  int32_t bos_id() const override { return vocab_.bos; }
  int32_t eos_id() const override { return vocab_.eos; }
  bool add_bos() const override { return vocab_.add_bos; }
  bool add_eos() const override { return vocab_.add_eos; }
  bool is_eog(int32_t id) const override { return vocab_.eog.count(id) > 0; }
  const std::string& model_name() const override { return model_; }
  const std::string& pre_name() const override { return pre_; }
  int32_t eot_id() const override { return vocab_.eot; }
  int32_t eom_id() const override { return vocab_.eom; }
  FimTokens fim_tokens() const override {
    return {vocab_.fim_pre, vocab_.fim_suf, vocab_.fim_mid, vocab_.fim_pad, vocab_.fim_rep, vocab_.fim_sep};
  }
  int32_t unk_id() const override { return vocab_.unk; }
  int32_t pad_id() const override { return vocab_.pad; }
  bool is_control(int32_t id) const override { return vocab_.has(id, kAttrControl | kAttrUnknown); }
  TokenType token_type(int32_t id) const override;
  const std::string& token_text(int32_t id) const override;
  int32_t find_token(std::string_view text) const override { return vocab_.find(text); }

  const Vocab& vocab() const { return vocab_; }

 protected:
  // Encodes one raw-text fragment. first_or_after_special: the fragment starts the input or
  // follows a special token (SentencePiece adds its space prefix there).
  virtual void encode_fragment(std::string_view text, bool first_or_after_special,
                               std::vector<int32_t>* out) const = 0;
  // The piece for control / unknown / user-defined tokens (their text) or "" when hidden; sets
  // *handled = false for the other kinds, which the subclass decodes.
  std::string special_piece(int32_t id, bool special, bool* handled) const;

  Vocab vocab_;
  std::string model_;
  std::string pre_;
};

}  // namespace strata::text
