// The Jinja lexer: source preparation (trim_blocks, lstrip_blocks, generation markers) with
// each prepared byte's origin kept, then text / tag tokens.
#include "text/jinja/lexer.h"

#include "text/jinja/value.h"

#include <cstring>

namespace strata::jinja {
namespace {

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Prepared text and, for each of its bytes, its offset in the original source.
struct Prepared {
  std::string text;
  std::vector<uint32_t> origin;
  void put(char c, uint32_t at) {
    text += c;
    origin.push_back(at);
  }
  void trim_back_to(size_t floor) {
    while (text.size() > floor && is_space(text.back())) {
      text.pop_back();
      origin.pop_back();
    }
  }
};

Prepared lstrip_blocks(std::string_view src) {
  Prepared out;
  for (size_t i = 0; i < src.size();) {
    if (i == 0 || src[i - 1] == '\n' || src[i - 1] == '\r') {
      size_t j = i;
      while (j < src.size() && (src[j] == ' ' || src[j] == '\t')) ++j;
      if (j > i && j + 1 < src.size() && src[j] == '{' && std::strchr("#%-", src[j + 1])) i = j;
    }
    out.put(src[i], static_cast<uint32_t>(i));
    ++i;
  }
  return out;
}

Prepared trim_blocks(const Prepared& in) {
  Prepared out;
  for (size_t i = 0; i < in.text.size(); ++i) {
    const char c = in.text[i];
    if (c == '\n' && i >= 2 && in.text[i - 1] == '}' && std::strchr("#%-", in.text[i - 2])) continue;
    out.put(c, in.origin[i]);
  }
  return out;
}

// `{%-? \s* (end)?generation \s* -?%}` and the whitespace after it: a marker for assistant-mask
// training that renders as nothing (its `-` strip as a tag's would).
Prepared drop_generation(const Prepared& in) {
  Prepared out;
  const std::string& s = in.text;
  size_t floor = 0;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "{%") == 0) {
      size_t j = i + 2;
      const bool lstrip = j < s.size() && s[j] == '-';
      if (lstrip) ++j;
      while (j < s.size() && is_space(s[j])) ++j;
      if (s.compare(j, 3, "end") == 0) j += 3;
      if (s.compare(j, 10, "generation") == 0) {
        j += 10;
        while (j < s.size() && is_space(s[j])) ++j;
        const bool rstrip = j < s.size() && s[j] == '-';
        if (rstrip) ++j;
        if (s.compare(j, 2, "%}") == 0) {
          j += 2;
          if (lstrip) out.trim_back_to(floor);
          if (rstrip)
            while (j < s.size() && is_space(s[j])) ++j;
          floor = out.text.size();
          i = j;
          continue;
        }
      }
    }
    out.put(s[i], in.origin[i]);
    ++i;
  }
  return out;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Lexer {
 public:
  Lexer(std::string_view source, Prepared p) : source_(source), p_(std::move(p)) {}

  Result<std::vector<Token>> run() {
    const std::string& s = p_.text;
    while (i_ < s.size()) {
      size_t end = i_;
      while (true) {
        end = s.find('{', end);
        if (end == std::string::npos) {
          end = s.size();
          break;
        }
        if (end + 1 < s.size() && std::strchr("%{#", s[end + 1])) break;
        ++end;
      }
      if (end > i_) push(Tok::text, s.substr(i_, end - i_), i_);
      i_ = end;
      if (i_ >= s.size()) break;
      const size_t open = i_;
      if (s[i_ + 1] == '#') {
        i_ += 2;
        const bool strip_before = i_ < s.size() && s[i_] == '-';
        const size_t close = s.find("#}", i_);
        if (close == std::string::npos) return fail(open, "unterminated comment (no #})");
        const bool strip_after = close > i_ + (strip_before ? 1 : 0) && s[close - 1] == '-';
        if (strip_before) strip_last_text();
        i_ = close + 2;
        if (strip_after) skip_space();
        after_comment_ = true;
        continue;
      }
      const bool expr = s[i_ + 1] == '{';
      i_ += 2;
      if (i_ < s.size() && s[i_] == '-') {
        strip_last_text();
        ++i_;
      }
      push(expr ? Tok::open_expr : Tok::open_stmt, expr ? "{{" : "{%", open);
      STRATA_TRY(tag(expr, open));
    }
    push(Tok::eof, "", s.size());
    return std::move(toks_);
  }

 private:
  Pos pos_of(size_t at) const {
    const size_t orig = at < p_.origin.size() ? p_.origin[at] : source_.size();
    Pos p;
    for (size_t k = 0; k < orig && k < source_.size(); ++k) {
      if (source_[k] == '\n') {
        ++p.line;
        p.col = 1;
      } else if ((static_cast<unsigned char>(source_[k]) & 0xc0) != 0x80) {
        ++p.col;
      }
    }
    return p;
  }
  Error fail(size_t at, const std::string& msg) const { return Error{pos_prefix(pos_of(at)) + msg}; }
  void push(Tok kind, std::string value, size_t at) {
    toks_.push_back(Token{kind, std::move(value), pos_of_cached(at)});
    after_comment_ = false;
  }
  Pos pos_of_cached(size_t at) {
    // Tokens come in order: advance a cursor over the original source instead of rescanning.
    const size_t orig = at < p_.origin.size() ? p_.origin[at] : source_.size();
    if (orig < cur_off_) {
      cur_off_ = 0;
      cur_ = Pos{};
    }
    for (; cur_off_ < orig && cur_off_ < source_.size(); ++cur_off_) {
      if (source_[cur_off_] == '\n') {
        ++cur_.line;
        cur_.col = 1;
      } else if ((static_cast<unsigned char>(source_[cur_off_]) & 0xc0) != 0x80) {
        ++cur_.col;
      }
    }
    return cur_;
  }
  // `{{-` / `{%-` / `{#-`: the whitespace ending the text just before goes (not across a comment:
  // text before a comment keeps its whitespace, as in Python's Jinja and @huggingface/jinja).
  void strip_last_text() {
    if (after_comment_ || toks_.empty() || toks_.back().kind != Tok::text) return;
    std::string& t = toks_.back().value;
    while (!t.empty() && is_space(t.back())) t.pop_back();
    if (t.empty()) toks_.pop_back();
  }
  void skip_space() {
    while (i_ < p_.text.size() && is_space(p_.text[i_])) ++i_;
  }

  Status tag(bool expr, size_t open) {
    const std::string& s = p_.text;
    int depth = 0;
    while (true) {
      skip_space();
      if (i_ >= s.size()) return fail(open, expr ? "unterminated {{ (no }})" : "unterminated {% (no %})");
      const char c = s[i_];
      const size_t at = i_;
      if (c == '-' && i_ + 2 < s.size() && s[i_ + 2] == '}' && (s[i_ + 1] == '%' || s[i_ + 1] == '}') &&
          depth == 0) {
        if ((s[i_ + 1] == '}') != expr)
          return fail(at, expr ? "expected }} to close {{" : "expected %} to close {%");
        push(expr ? Tok::close_expr : Tok::close_stmt, expr ? "}}" : "%}", at);
        i_ += 3;
        skip_space();
        return {};
      }
      if (c == '%' && !expr && i_ + 1 < s.size() && s[i_ + 1] == '}') {
        push(Tok::close_stmt, "%}", at);
        i_ += 2;
        return {};
      }
      if (c == '}' && expr && depth == 0 && i_ + 1 < s.size() && s[i_ + 1] == '}') {
        push(Tok::close_expr, "}}", at);
        i_ += 2;
        return {};
      }
      if (is_alpha(c)) {
        size_t j = i_;
        while (j < s.size() && (is_alpha(s[j]) || is_digit(s[j]))) ++j;
        push(Tok::name, s.substr(i_, j - i_), at);
        i_ = j;
        continue;
      }
      if (is_digit(c)) {
        size_t j = i_;
        while (j < s.size() && (is_digit(s[j]) || s[j] == '_')) ++j;
        bool is_float = false;
        if (j + 1 < s.size() && s[j] == '.' && is_digit(s[j + 1])) {
          is_float = true;
          ++j;
          while (j < s.size() && is_digit(s[j])) ++j;
        }
        std::string num;
        for (size_t k = i_; k < j; ++k)
          if (s[k] != '_') num += s[k];
        push(is_float ? Tok::floating : Tok::integer, num, at);
        i_ = j;
        continue;
      }
      if (c == '\'' || c == '"') {
        STRATA_TRY(string_literal(c));
        continue;
      }
      static constexpr const char* kTwo[] = {"==", "!=", "<=", ">=", "//", "**"};
      bool two = false;
      for (const char* op : kTwo) {
        if (s.compare(i_, 2, op) == 0) {
          push(Tok::op, op, at);
          i_ += 2;
          two = true;
          break;
        }
      }
      if (two) continue;
      if (!std::strchr("+-*/%~|.,:()[]{}<>=", c))
        return fail(at, std::string("unexpected character '") + c + "'");
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      push(Tok::op, std::string(1, c), at);
      ++i_;
    }
  }

  Status string_literal(char quote) {
    const std::string& s = p_.text;
    const size_t at = i_;
    std::string out;
    ++i_;
    while (true) {
      if (i_ >= s.size()) return fail(at, "unterminated string");
      const char c = s[i_++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s.size()) return fail(at, "unterminated string");
      const char e = s[i_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\'':
        case '"':
        case '\\':
          out += e;
          break;
        case 'x':
        case 'u': {
          const size_t n = e == 'x' ? 2 : 4;
          if (i_ + n > s.size()) return fail(at, "bad \\" + std::string(1, e) + " escape in a string");
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const char h = s[i_ + k];
            const int d = is_digit(h)              ? h - '0'
                          : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                          : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                   : -1;
            if (d < 0) return fail(at, "bad \\" + std::string(1, e) + " escape in a string");
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          i_ += n;
          // A surrogate pair written as two \u escapes is one code point.
          if (cp >= 0xd800 && cp < 0xdc00 && s.compare(i_, 2, "\\u") == 0 && i_ + 6 <= s.size()) {
            const uint32_t lo = static_cast<uint32_t>(std::strtoul(s.substr(i_ + 2, 4).c_str(), nullptr, 16));
            if (lo >= 0xdc00 && lo < 0xe000) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
              i_ += 6;
            }
          }
          append_utf8(cp, &out);
          break;
        }
        default:  // Python keeps an unknown escape as written
          out += '\\';
          out += e;
      }
    }
    // Adjacent literals are one string ('a' 'b'): the parser joins them.
    push(Tok::string, std::move(out), at);
    return {};
  }

  std::string_view source_;
  Prepared p_;
  size_t i_ = 0;
  std::vector<Token> toks_;
  size_t cur_off_ = 0;
  bool after_comment_ = false;  // the last thing lexed was a comment
  Pos cur_;
};

}  // namespace

std::string pos_prefix(Pos p) {
  return "line " + std::to_string(p.line) + ", column " + std::to_string(p.col) + ": ";
}

Result<std::vector<Token>> lex(std::string_view source) {
  std::string_view src = source;
  if (src.ends_with('\n')) src.remove_suffix(1);
  Prepared p = drop_generation(trim_blocks(lstrip_blocks(src)));
  return Lexer(source, std::move(p)).run();
}

}  // namespace strata::jinja
