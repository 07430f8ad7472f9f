// SentencePiece BPE (tokenizer.ggml.model = "llama"): spaces become "▁" (plus a leading "▁"
// with add_space_prefix), UTF-8 characters are merged greedily by token score (ties: leftmost),
// and characters no token covers fall back to <0xXX> byte tokens, as llama.cpp's
// llm_tokenizer_spm_session does.
#pragma once

#include <array>
#include <memory>

#include "text/vocab_tokenizer.h"

namespace strata::text {

class SpmTokenizer final : public VocabTokenizer {
 public:
  static Result<std::unique_ptr<SpmTokenizer>> create(VocabData data);

  std::string token_to_piece(int32_t id, bool special = false) const override;
  bool add_space_prefix() const override { return add_space_prefix_; }

 protected:
  void encode_fragment(std::string_view text, bool first_or_after_special,
                       std::vector<int32_t>* out) const override;

 private:
  SpmTokenizer(Vocab vocab, std::string model, std::string pre)
      : VocabTokenizer(std::move(vocab), model, pre) {}
  void encode_escaped(const std::string& text, std::vector<int32_t>* out) const;

  bool add_space_prefix_ = true;
  std::array<int32_t, 256> byte_token_{};  // byte -> <0xXX> token (or the 1-char token), -1 if none
};

}  // namespace strata::text
