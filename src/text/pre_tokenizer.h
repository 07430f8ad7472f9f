// Pre-tokenizer for byte-level BPE: splits text into words before BPE merges, with the regex
// list llama.cpp uses for each `tokenizer.ggml.pre` name, evaluated by PCRE2 (UTF + UCP).
//
// Semantics follow llama.cpp's unicode_regex_split() (RegexDialect::llama_cpp):
//  * the regexes are applied in order; each one re-splits every piece produced so far, and both
//    the matches and the unmatched gaps between them become pieces;
//  * a regex sees only the piece it splits (lookaheads and `$` stop at the piece end);
//  * `\s` is the Unicode White_Space set (incl. U+0085), as in llama.cpp's tables;
//  * invalid UTF-8 is replaced by U+FFFD first (one per bad byte).
// Hugging Face tokenizer.json Split steps (RegexDialect::huggingface, behavior "Isolated") split the
// same way, but their regexes see every code point as it is and `^` / `$` match at line breaks
// (Oniguruma's defaults).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace strata::text {

// Per-name properties llama.cpp attaches to a pre-tokenizer.
struct PreTokenizerInfo {
  std::string name;                  // canonical family name, e.g. "llama3"
  std::vector<std::string> regexes;  // llama.cpp's (std::regex-compatible) patterns
  bool ignore_merges = false;        // a word that is already a token skips BPE merges
  bool add_bos = false;              // default for add_bos when metadata does not say
  bool clean_spaces = true;          // clean_up_tokenization_spaces (detokenize)
};

// nullptr-free: unknown names are an error naming the value.
Result<PreTokenizerInfo> pre_tokenizer_info(std::string_view pre_name);

enum class RegexDialect {
  llama_cpp,    // non-ASCII White_Space is seen as U+000B by the regexes; `$` = piece end only
  huggingface,  // code points as they are; `^` / `$` also at line breaks
};

class PreTokenizer {
 public:
  static Result<std::unique_ptr<PreTokenizer>> create(const std::vector<std::string>& regexes,
                                                      RegexDialect dialect = RegexDialect::llama_cpp);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Words in order; concatenated they equal the input with invalid UTF-8 replaced by U+FFFD.
  std::vector<std::string> split(std::string_view text) const;

 private:
  PreTokenizer() = default;
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  RegexDialect dialect_ = RegexDialect::llama_cpp;
};

// Rewrites `\s` / `\S` into explicit White_Space classes (PCRE2's \s lacks U+0085). Exposed for tests.
Result<std::string> expand_whitespace_escapes(std::string_view pattern);

}  // namespace strata::text
