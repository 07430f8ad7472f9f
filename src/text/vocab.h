// Vocabulary shared by the BPE and SentencePiece tokenizers: token texts, scores and types,
// text -> id lookup, special ids and the add_bos/add_eos rules, end-of-generation set, and the
// special-token partition of input text.
//
// VocabData is the plain form of the tokenizer.ggml.* metadata, so tokenizers can be built
// (and tested) without a GGUF file; Vocab::build validates it and derives everything else with
// llama.cpp's rules (de3ff81, llama_vocab::impl::load).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "text/flat_maps.h"

namespace strata::text {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

// Token attribute bits (a token can gain bits beyond its type, e.g. an "<|im_end|>" marked
// normal in the file is treated as control, like llama.cpp does).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

// Whitespace an added token of a tokenizer.json swallows next to it (its lstrip / rstrip flags).
enum StripBits : uint8_t { kStripLeft = 1, kStripRight = 2 };

struct VocabData {
  std::string model;                 // tokenizer.ggml.model: "gpt2" (BPE) or "llama" (SPM)
  std::string pre;                   // tokenizer.ggml.pre ("" = default)
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores (empty = all 0)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (empty = all normal)
  std::vector<std::string> merges;   // tokenizer.ggml.merges, "left right", rank = index
  std::optional<int64_t> bos_id, eos_id, eot_id, eom_id, unk_id, pad_id;
  std::optional<int64_t> fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::vector<uint8_t> token_strip;  // StripBits per token (tokenizer.json only; empty = none)
  // Special tokens match leftmost-longest in the text (HF tokenizers) instead of longest token
  // first over the whole text (llama.cpp).
  bool leftmost_longest = false;
};

struct Vocab {
  std::vector<std::string> text;  // [n_vocab]
  std::vector<float> score;       // [n_vocab]
  std::vector<uint32_t> attr;     // [n_vocab] TokenAttr bits
  std::vector<uint8_t> strip;     // [n_vocab] StripBits, or empty when no token strips
  TokenIndex index;               // text -> id over `text`

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  // Fill-in-the-middle tokens (metadata ids, else found by their usual texts), -1 if none.
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false;
  bool add_eos = false;
  std::set<int32_t> eog;
  // Control / user-defined / unknown ids, longest text first (the order llama.cpp splits in).
  std::vector<int32_t> specials;
  bool leftmost_longest = false;  // VocabData::leftmost_longest
  // leftmost_longest only: `specials` by their first byte (longest first), for the scan.
  std::vector<std::vector<int32_t>> specials_by_byte;

  int32_t n() const { return static_cast<int32_t>(text.size()); }
  int32_t find(std::string_view s) const { return index.find(s, text); }
  bool has(int32_t id, uint32_t bits) const { return id >= 0 && id < n() && (attr[id] & bits) != 0; }

  // Validates tokens / scores / types and fills text, score, attr, index. Special ids and flags
  // are set by finish_specials once the tokenizer kind knows its defaults.
  static Result<Vocab> build(VocabData& data);
  // bos/eos/... from data (over the given defaults), eot/eom/eog detection by text, specials.
  Status finish_specials(const VocabData& data, int32_t default_bos, int32_t default_eos, int32_t default_unk,
                         bool default_add_bos);
};

// One piece of input after special-token splitting: raw text, or a special token id.
struct Fragment {
  int32_t token = -1;  // >= 0: a special token
  std::string_view text;
};

// Splits text on special-token texts, longest tokens first (llama.cpp tokenizer_st_partition), or
// leftmost-longest when vocab.leftmost_longest (HF tokenizers' added vocabulary).
// User-defined tokens are always split out; control and unknown tokens only with parse_special.
// A token with StripBits drops the Unicode White_Space on that side of it from the text beside it.
std::vector<Fragment> partition_specials(const Vocab& vocab, std::string_view text, bool parse_special);

}  // namespace strata::text
