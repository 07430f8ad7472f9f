// PCRE2 evaluation of pre-tokenizer regex lists (see pre_tokenizer.h for the semantics).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pre_tokenizer.h"

#include <pcre2.h>

#include "text/utf8.h"

namespace strata::text {

// Unicode White_Space, the set llama.cpp's \s means (PCRE2's UCP \s leaves out U+0085).
static constexpr const char* kWhiteSpaceItems =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

Result<std::string> expand_whitespace_escapes(std::string_view p) {
  const int plen = static_cast<int>(p.size());  // for "%.*s"
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) return err("regex '%.*s' ends with a lone backslash", plen, p.data());
      const char e = p[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpaceItems) : "[" + std::string(kWhiteSpaceItems) + "]";
      } else if (e == 'S') {
        if (in_class) return err("regex '%.*s': \\S inside a class is not supported", plen, p.data());
        out += "[^" + std::string(kWhiteSpaceItems) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  if (in_class) return err("regex '%.*s' has an unterminated character class", plen, p.data());
  return out;
}

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::~PreTokenizer() = default;

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::create(const std::vector<std::string>& regexes,
                                                           RegexDialect dialect) {
  std::unique_ptr<PreTokenizer> pt(new PreTokenizer());
  pt->dialect_ = dialect;
  for (const std::string& src : regexes) {
    STRATA_ASSIGN(std::string pat, expand_whitespace_escapes(src));
    int code = 0;
    PCRE2_SIZE off = 0;
    // llama.cpp: `$` means the piece end only (ECMAScript semantics). Oniguruma (HF): `^` and
    // `$` also match at line breaks.
    const uint32_t opts =
        PCRE2_UTF | PCRE2_UCP | (dialect == RegexDialect::llama_cpp ? PCRE2_DOLLAR_ENDONLY : PCRE2_MULTILINE);
    auto re = std::make_unique<Regex>();
    re->code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(), opts, &code, &off, nullptr);
    if (!re->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(code, msg, sizeof(msg));
      return err("pre-tokenizer regex '%s' does not compile at offset %zu: %s", src.c_str(),
                 static_cast<size_t>(off), reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);  // optional: the interpreter is the fallback
    pt->regexes_.push_back(std::move(re));
  }
  return pt;
}

namespace {

// Non-ASCII members of Unicode White_Space (the ASCII ones are \t \n \v \f \r and space).
bool is_unicode_space(uint32_t c) {
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// A piece is a code point range [begin, end) of the text being split.
struct Piece {
  size_t begin;
  size_t end;
};

// Calls pcre2_match, retrying without JIT if the JIT stack runs out on a long piece.
int match_at(const pcre2_code* code, const char* subj, size_t len, size_t start, pcre2_match_data* md) {
  const auto s = reinterpret_cast<PCRE2_SPTR>(subj);
  int rc = pcre2_match(code, s, len, start, PCRE2_NO_UTF_CHECK, md, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
    rc = pcre2_match(code, s, len, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
  return rc;
}

}  // namespace

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  const std::vector<uint32_t> cpts = utf8_decode(text);
  // The regex subject: valid UTF-8 of cpts, with two substitutions (the words keep the original
  // code points):
  //  * non-ASCII White_Space -> U+000B (llama_cpp dialect only). llama.cpp does this before every
  //    regex it runs, so e.g. U+3000 matches \s but not a class that lists U+3000 (deepseek's
  //    CJK ranges);
  //  * surrogates, which the lenient decoder lets through, -> U+FFFD (PCRE2 needs valid UTF-8).
  // byte_of[i] = subject offset of cpt i; cpt_of maps offsets back.
  std::string subj;
  subj.reserve(text.size() + 8);
  std::vector<size_t> byte_of(cpts.size() + 1);
  for (size_t i = 0; i < cpts.size(); ++i) {
    byte_of[i] = subj.size();
    uint32_t c = cpts[i];
    if (c >= 0x80 && dialect_ == RegexDialect::llama_cpp && is_unicode_space(c)) c = 0x0B;
    if (c >= 0xD800 && c <= 0xDFFF) c = kReplacementChar;
    utf8_append(&subj, c);
  }
  byte_of[cpts.size()] = subj.size();
  std::vector<uint32_t> cpt_of(subj.size() + 1, 0);
  for (size_t i = 0; i <= cpts.size(); ++i) cpt_of[byte_of[i]] = static_cast<uint32_t>(i);

  std::vector<Piece> pieces;
  if (!cpts.empty()) pieces.push_back({0, cpts.size()});
  std::vector<Piece> next;
  for (const auto& re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    STRATA_ASSERT(md != nullptr);
    next.clear();
    for (const Piece& p : pieces) {
      const size_t b0 = byte_of[p.begin];
      const size_t len = byte_of[p.end] - b0;
      const char* s = subj.data() + b0;
      size_t prev = 0;  // end of the last emitted part, piece-relative bytes
      size_t pos = 0;
      while (pos <= len) {
        const int rc = match_at(re->code, s, len, pos, md);
        if (rc < 0) break;  // no (further) match; an engine error leaves the rest unsplit
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t ms = ov[0], me = ov[1];
        if (me == ms) {  // empty match: contributes nothing, step one code point
          if (ms >= len) break;
          pos = ms + utf8_seq_len(static_cast<uint8_t>(s[ms]));
          continue;
        }
        if (ms > prev) next.push_back({cpt_of[b0 + prev], cpt_of[b0 + ms]});
        next.push_back({cpt_of[b0 + ms], cpt_of[b0 + me]});
        prev = pos = me;
      }
      if (prev < len) next.push_back({cpt_of[b0 + prev], p.end});
    }
    pcre2_match_data_free(md);
    pieces.swap(next);
  }

  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const Piece& p : pieces) {
    std::string w;
    for (size_t i = p.begin; i < p.end; ++i) utf8_append(&w, cpts[i]);
    words.push_back(std::move(w));
  }
  return words;
}

}  // namespace strata::text
