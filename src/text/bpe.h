// Byte-level BPE (tokenizer.ggml.model = "gpt2"): pre-tokenize with the named regexes, map each
// word's bytes to GPT-2's byte alphabet, then apply merges lowest rank first (ties: leftmost),
// exactly like llama.cpp's llm_tokenizer_bpe_session. The same engine runs Hugging Face
// tokenizer.json byte-level BPE models (tokenizer_json.cpp) with BpeOptions from that file.
#pragma once

#include <array>
#include <memory>

#include "text/flat_maps.h"
#include "text/pre_tokenizer.h"
#include "text/vocab_tokenizer.h"

namespace strata::text {

// What differs between a GGUF vocab (llama.cpp's rules) and a tokenizer.json one (HF's rules).
struct BpeOptions {
  PreTokenizerInfo pre;  // regexes, ignore_merges, the add_bos default
  RegexDialect dialect = RegexDialect::llama_cpp;
  bool nfc = false;               // HF NFC normalizer: each text fragment is composed first
  bool add_prefix_space = false;  // HF ByteLevel: " " before a fragment that does not start with one
  // A byte whose alphabet character is not a token. llama.cpp (hf_unknown = false): the UTF-8
  // bytes of that character as one-byte tokens, when they exist. HF: with byte_fallback its
  // "<0xXX>" tokens when all exist, else unk (one per run of them with fuse_unk), else nothing.
  bool hf_unknown = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
};

class BpeTokenizer final : public VocabTokenizer {
 public:
  // data.model must be "gpt2"; merges are validated (both halves and the result must be tokens).
  static Result<std::unique_ptr<BpeTokenizer>> create(VocabData data);
  // The same with explicit options (data.pre is then only the name pre_name() reports).
  static Result<std::unique_ptr<BpeTokenizer>> create(VocabData data, BpeOptions options);

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

  // Appends the ids for a byte of the word whose alphabet character is not a token; true when
  // that byte became (or was fused into) the unknown token.
  bool encode_unknown_byte(uint8_t byte, bool after_unk, std::vector<int32_t>* out) const;

  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  BpeOptions opt_;
  MergeTable merges_;                      // (left id, right id) -> rank, result id
  std::array<int32_t, 256> byte_token_{};  // raw byte -> id of its alphabet character (-1 if none)
};

}  // namespace strata::text
