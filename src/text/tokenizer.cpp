#include "text/tokenizer.h"

#include "text/bpe.h"
#include "text/spm.h"

namespace strata {

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_data(text::VocabData data) {
  if (data.model == "gpt2") {
    STRATA_ASSIGN(auto t, text::BpeTokenizer::create(std::move(data)));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  if (data.model == "llama") {
    STRATA_ASSIGN(auto t, text::SpmTokenizer::create(std::move(data)));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  if (data.model.empty()) return err("tokenizer.ggml.model is missing");
  return err("unsupported tokenizer.ggml.model '%s' (supported: gpt2, llama)", data.model.c_str());
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool special) const {
  std::string out;
  // SentencePiece: the space prefix added by encode is not part of the text (llama.cpp strips
  // one leading space from the first token, whatever that token is).
  bool strip = add_space_prefix();
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, special);
    if (strip && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip = false;
    out += piece;
  }
  return out;
}

}  // namespace strata
