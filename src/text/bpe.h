// Byte-level BPE (tokenizer.ggml.model = "gpt2"): pre-tokenize with the named regexes, map each
// word's bytes to GPT-2's byte alphabet, then apply merges lowest rank first (ties: leftmost),
// exactly like llama.cpp's llm_tokenizer_bpe_session.
#pragma once

#include <array>
#include <memory>

#include "text/flat_maps.h"
#include "text/pre_tokenizer.h"
#include "text/vocab_tokenizer.h"

namespace strata::text {

class BpeTokenizer final : public VocabTokenizer {
 public:
  // data.model must be "gpt2"; merges are validated (both halves and the result must be tokens).
  static Result<std::unique_ptr<BpeTokenizer>> create(VocabData data);

  std::string token_to_piece(int32_t id, bool special = false) const override;
  bool add_space_prefix() const override { return false; }

  // BPE of one pre-tokenized word given as raw bytes (exposed for tests).
  void encode_word(std::string_view raw_word, std::vector<int32_t>* out) const;
  size_t n_merges() const { return merges_.size(); }

 protected:
  void encode_fragment(std::string_view text, bool first_or_after_special,
                       std::vector<int32_t>* out) const override;

 private:
  BpeTokenizer(Vocab vocab, std::string model, std::string pre)
      : VocabTokenizer(std::move(vocab), model, pre) {}

  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  PreTokenizerInfo info_;
  MergeTable merges_;                      // (left id, right id) -> rank, result id
  std::array<int32_t, 256> byte_token_{};  // raw byte -> id of its alphabet character (-1 if none)
};

}  // namespace strata::text
