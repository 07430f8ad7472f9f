// Tokenizers read from GGUF metadata (tokenizer.ggml.*): byte-level BPE (`gpt2`) with llama.cpp's
// named pre-tokenizers, and SentencePiece (`llama`) with byte fallback; and from a Hugging Face
// tokenizer.json whose model is byte-level BPE (tokenizer_json.cpp).
//
// GGUF token ids match llama.cpp (de3ff81) llama_tokenize / llama_token_to_piece for the same
// vocab; tokenizer.json ids match HF tokenizers (added tokens split out before pre-tokenizing).
// Encoding never fails: any bytes are accepted (invalid UTF-8 is handled as llama.cpp does).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "text/vocab.h"

namespace strata {

// A vocabulary's fill-in-the-middle tokens (-1: none). Infill needs pre, suf and mid; rep and
// sep mark repository-level context (project name, file names) where the model has them.
struct FimTokens {
  int32_t pre = -1, suf = -1, mid = -1, pad = -1, rep = -1, sep = -1;
  bool usable() const { return pre >= 0 && suf >= 0 && mid >= 0; }
};

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);
  // The same from plain metadata (what from_gguf reads); errors name the bad field.
  static Result<std::unique_ptr<Tokenizer>> from_data(text::VocabData data);
  // A Hugging Face tokenizer.json (model BPE, ByteLevel pre-tokenizer). A tokenizer_config.json in
  // the same directory, if there is one, gives bos / eos / unk / pad and add_bos_token /
  // add_eos_token (as transformers reads them). Errors name the file and the field.
  static Result<std::unique_ptr<Tokenizer>> from_json_file(const std::string& path);
  // The same from the files' text (config_json may be empty); the names are used in errors.
  static Result<std::unique_ptr<Tokenizer>> from_json(
      std::string_view tokenizer_json, std::string_view config_json, const std::string& name,
      const std::string& config_name = "tokenizer_config.json");
  virtual ~Tokenizer() = default;

  // add_special: prepend BOS / append EOS as the vocab's metadata says.
  // parse_special: text like "<|im_start|>" becomes its control token (else plain text; HF
  // tokenizers always split special added tokens out, i.e. parse_special = true).
  // User-defined tokens are always matched as whole tokens (as in llama.cpp / HF tokenizers).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const = 0;
  // The bytes of one token as text (byte-level tokens mapped back to raw bytes; control tokens
  // give their text only when `special` is true). Out-of-range ids give "".
  virtual std::string token_to_piece(int32_t id, bool special = false) const = 0;
  // Concatenated pieces; for SentencePiece vocabs with add_space_prefix the first piece loses
  // one leading space, so decode(encode(s, false, false)) == s for valid UTF-8 s.
  std::string decode(const std::vector<int32_t>& ids, bool special = false) const;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;
  virtual bool add_bos() const = 0;
  virtual bool is_eog(int32_t id) const = 0;          // end of generation (eos, eot, eom, ...)
  virtual const std::string& model_name() const = 0;  // "gpt2", "llama"
  virtual const std::string& pre_name() const = 0;    // "qwen2", "default", ...

  virtual bool add_eos() const = 0;
  virtual int32_t eot_id() const = 0;  // -1 if none
  virtual int32_t eom_id() const = 0;
  virtual int32_t unk_id() const = 0;
  virtual int32_t pad_id() const = 0;
  virtual bool add_space_prefix() const = 0;  // SentencePiece "▁" prefix on the first fragment
  // Control or unknown token (what token_to_piece hides unless special = true).
  virtual bool is_control(int32_t id) const = 0;
  virtual text::TokenType token_type(int32_t id) const = 0;     // as in the file (or derived)
  virtual const std::string& token_text(int32_t id) const = 0;  // raw vocab text; "" when out of range
  virtual int32_t find_token(std::string_view text) const = 0;  // exact vocab text -> id, -1 if none
  virtual FimTokens fim_tokens() const { return {}; }
};

// The tokenizer.ggml.* metadata of a GGUF as plain data (what from_gguf builds from).
Result<text::VocabData> read_vocab_data(const GgufFile& file);

}  // namespace strata
