#include "text/vocab_tokenizer.h"

namespace strata::text {

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_special,
                                            bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  bool after_special = true;
  for (const Fragment& f : partition_specials(vocab_, text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_fragment(f.text, after_special, &out);
      after_special = false;
    }
  }
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

TokenType VocabTokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= vocab_.n()) return TokenType::undefined;
  const uint32_t a = vocab_.attr[id];
  if (a & kAttrUserDefined) return TokenType::user_defined;
  if (a & kAttrControl) return TokenType::control;
  if (a & kAttrUnknown) return TokenType::unknown;
  if (a & kAttrByte) return TokenType::byte;
  if (a & kAttrUnused) return TokenType::unused;
  if (a & kAttrNormal) return TokenType::normal;
  return TokenType::undefined;
}

const std::string& VocabTokenizer::token_text(int32_t id) const {
  static const std::string empty;
  return id >= 0 && id < vocab_.n() ? vocab_.text[id] : empty;
}

std::string VocabTokenizer::special_piece(int32_t id, bool special, bool* handled) const {
  *handled = true;
  if (id < 0 || id >= vocab_.n()) return {};
  const uint32_t a = vocab_.attr[id];
  if (a & (kAttrControl | kAttrUnknown)) return special ? vocab_.text[id] : std::string();
  if (a & kAttrUserDefined) return vocab_.text[id];
  *handled = false;
  return {};
}

}  // namespace strata::text
