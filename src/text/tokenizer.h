// Tokenizers read from GGUF metadata (tokenizer.ggml.*): byte-level BPE (`gpt2`) with llama.cpp's
// named pre-tokenizers, and SentencePiece (`llama`) with byte fallback.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"

namespace strata {

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);
  virtual ~Tokenizer() = default;

  // add_special: prepend BOS / append EOS as the vocab's metadata says.
  // parse_special: text like "<|im_start|>" becomes its control token (else plain text).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const = 0;
  // The bytes of one token as text (byte-level tokens mapped back to raw bytes; control tokens
  // give their text only when `special` is true).
  virtual std::string token_to_piece(int32_t id, bool special = false) const = 0;
  std::string decode(const std::vector<int32_t>& ids, bool special = false) const;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;
  virtual bool add_bos() const = 0;
  virtual bool is_eog(int32_t id) const = 0;  // end of generation (eos, eot, eom, ...)
  virtual const std::string& model_name() const = 0;  // "gpt2", "llama"
  virtual const std::string& pre_name() const = 0;    // "qwen2", "default", ...
};

}  // namespace strata
