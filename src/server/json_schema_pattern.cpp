#include "server/json_schema_pattern.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <vector>

#include "text/utf8.h"

namespace strata::server {

namespace {

struct Range {
  uint32_t lo, hi;
};

constexpr uint32_t kMaxCp = 0x10FFFF;

std::string hex_cp(uint32_t cp) {
  char buf[16];
  if (cp <= 0xFF)
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  else if (cp <= 0xFFFF)
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  else
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

// The JSON text of code point cp, as a GBNF literal.
std::string cp_literal(uint32_t cp) {
  switch (cp) {
    case '"':
      return R"("\\\"")";
    case '\\':
      return R"("\\\\")";
    case '\n':
      return R"("\\n")";
    case '\r':
      return R"("\\r")";
    case '\t':
      return R"("\\t")";
    case '\b':
      return R"("\\b")";
    case '\f':
      return R"("\\f")";
    default:
      break;
  }
  if (cp < 0x20) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\"\\\\u%04X\"", cp);
    return buf;
  }
  return "\"" + hex_cp(cp) + "\"";
}

bool contains(const std::vector<Range>& rs, uint32_t cp) {
  return std::any_of(rs.begin(), rs.end(), [&](const Range& r) { return r.lo <= cp && cp <= r.hi; });
}

// The JSON text of one character in the set (negated: not in it).
std::string class_grammar(std::vector<Range> rs, bool negated) {
  std::string cls;
  auto add = [&](uint32_t lo, uint32_t hi) {
    cls += hex_cp(lo);
    if (hi > lo) cls += "-" + hex_cp(hi);
  };
  if (negated) {
    for (const Range& r : rs) add(r.lo, r.hi);
    add(0, 0x1F);
    add('"', '"');
    add('\\', '\\');
  } else {
    for (const Range& r : rs) {  // minus what JSON escapes
      uint32_t lo = r.lo;
      for (uint32_t cut : {0x1Fu, static_cast<uint32_t>('"'), static_cast<uint32_t>('\\')}) {
        const uint32_t cut_lo = cut == 0x1F ? 0 : cut;
        if (lo > r.hi) break;
        if (lo <= cut && cut_lo <= r.hi) {
          if (lo < cut_lo) add(lo, cut_lo - 1);
          lo = std::max(lo, cut + 1);
        }
      }
      if (lo <= r.hi) add(lo, r.hi);
    }
  }
  std::vector<std::string> alts;
  if (negated || !cls.empty()) alts.push_back(std::string("[") + (negated ? "^" : "") + cls + "]");
  for (uint32_t cp : {uint32_t{'"'}, uint32_t{'\\'}, uint32_t{'\n'}, uint32_t{'\r'}, uint32_t{'\t'}})
    if (contains(rs, cp) != negated) alts.push_back(cp_literal(cp));
  if (alts.empty()) return "";
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return alts.size() == 1 ? out : "(" + out + ")";
}

const std::vector<Range> kDigit = {{'0', '9'}};
const std::vector<Range> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const std::vector<Range> kSpace = {
    {'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}};

// Any text of JSON string characters (what an unanchored end allows).
constexpr const char* kAnyText = R"(([^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))*)";

class PatternParser {
 public:
  explicit PatternParser(std::string_view p) : p_(p) {}

  Result<std::string> run() {
    const bool start = !p_.empty() && p_[0] == '^';
    if (start) ++i_;
    STRATA_ASSIGN(std::string body, alternation());
    bool end = false;
    if (i_ < p_.size() && p_[i_] == '$' && i_ + 1 == p_.size()) {
      end = true;
      ++i_;
    }
    if (i_ < p_.size()) return fail(p_[i_] == ')' ? "an unmatched ')'" : "'" + std::string(1, p_[i_]) + "'");
    return std::string("\"\\\"\" ") + (start ? "" : std::string(kAnyText) + " ") + "(" + body + ") " +
           (end ? "" : std::string(kAnyText) + " ") + "\"\\\"\"";
  }

 private:
  std::string_view p_;
  size_t i_ = 0;
  int depth_ = 0;
  bool nullable_ = false;  // the last alternation, sequence or atom parsed can match nothing

  Status fail(const std::string& what) const {
    return err("%s at offset %zu is not supported", what.c_str(), i_);
  }
  bool at(char c) const { return i_ < p_.size() && p_[i_] == c; }

  Result<std::string> alternation() {
    std::string out;
    STRATA_ASSIGN(std::string first, sequence());
    out = first;
    bool any_empty = nullable_;
    while (at('|')) {
      ++i_;
      STRATA_ASSIGN(std::string next, sequence());
      out += " | " + next;
      any_empty = any_empty || nullable_;
    }
    nullable_ = any_empty;
    return out;
  }

  Result<std::string> sequence() {
    std::string out;
    bool all_empty = true;
    while (i_ < p_.size() && !at('|') && !at(')')) {
      if (at('$') && i_ + 1 == p_.size() && depth_ == 0) break;
      nullable_ = false;
      STRATA_ASSIGN(std::string a, atom());
      const bool empty = nullable_;
      STRATA_ASSIGN(std::string q, quantifier());
      // A repeated group that can match nothing would be a left-recursive rule.
      if (empty && !q.empty() && q != "?") return fail("a repeated group that can match nothing");
      all_empty = all_empty && (empty || q == "?" || q == "*" || q.rfind("{0", 0) == 0);
      out += (out.empty() ? "" : " ") + ("(" + a + ")" + q);
    }
    nullable_ = all_empty;
    return out.empty() ? std::string("\"\"") : out;
  }

  Result<std::string> quantifier() {
    std::string q;
    if (at('?') || at('*') || at('+')) {
      q = std::string(1, p_[i_++]);
    } else if (at('{')) {
      size_t j = i_ + 1, m = 0, n = 0;
      bool any_m = false, comma = false, any_n = false;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && m < 100000)
        m = m * 10 + size_t(p_[j++] - '0'), any_m = true;
      if (j < p_.size() && p_[j] == ',') {
        comma = true;
        ++j;
        while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && n < 100000)
          n = n * 10 + size_t(p_[j++] - '0'), any_n = true;
      }
      if (!any_m || j >= p_.size() || p_[j] != '}') return fail("a '{' that is not a {m}, {m,} or {m,n}");
      if (any_n && n < m) return fail("a repetition {m,n} with n < m");
      i_ = j + 1;
      q = "{" + std::to_string(m) + (comma ? "," + (any_n ? std::to_string(n) : std::string()) : "") + "}";
    } else {
      return q;
    }
    if (at('?')) ++i_;  // lazy: the same strings
    if (at('?') || at('*') || at('+') || at('{')) return fail("a quantifier after a quantifier");
    return q;
  }

  Result<uint32_t> hex(size_t n) {
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k, ++i_) {
      if (i_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[i_])))
        return fail("a bad \\x or \\u escape");
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(p_[i_])));
      v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    return v;
  }

  // After '\': a class (\d ...) into *set, or one code point.
  Result<uint32_t> escape(std::vector<Range>* set, bool* negated_set) {
    if (i_ >= p_.size()) return fail("a '\\' at the end");
    const char c = p_[i_++];
    *negated_set = false;
    switch (c) {
      case 'd':
        *set = kDigit;
        return uint32_t{0};
      case 'w':
        *set = kWord;
        return uint32_t{0};
      case 's':
        *set = kSpace;
        return uint32_t{0};
      case 'D':
        *set = kDigit, *negated_set = true;
        return uint32_t{0};
      case 'W':
        *set = kWord, *negated_set = true;
        return uint32_t{0};
      case 'S':
        *set = kSpace, *negated_set = true;
        return uint32_t{0};
      case 'n':
        return uint32_t{'\n'};
      case 'r':
        return uint32_t{'\r'};
      case 't':
        return uint32_t{'\t'};
      case 'f':
        return uint32_t{'\f'};
      case 'v':
        return uint32_t{'\v'};
      case '0':
        return uint32_t{0};
      case 'x':
        return hex(2);
      case 'u':
        return hex(4);
      default:
        break;
    }
    if (std::isalnum(static_cast<unsigned char>(c))) {
      --i_;
      return fail(std::string("the escape '\\") + c + "'");
    }
    return static_cast<uint32_t>(static_cast<unsigned char>(c));
  }

  uint32_t next_cp() {
    size_t pos = i_;
    const uint32_t cp = text::utf8_decode_one(p_, &pos);
    i_ = pos;
    return cp;
  }

  Result<std::string> char_class() {
    ++i_;  // '['
    const bool negated = at('^');
    if (negated) ++i_;
    std::vector<Range> rs;
    while (i_ < p_.size() && !at(']')) {
      uint32_t lo = 0;
      if (at('\\')) {
        ++i_;
        std::vector<Range> set;
        bool neg = false;
        auto l = escape(&set, &neg);
        if (!l.ok()) return l.status();
        lo = *l;
        if (neg) return fail("a negated class escape inside [...]");
        if (!set.empty()) {
          rs.insert(rs.end(), set.begin(), set.end());
          continue;
        }
      } else if (at('[')) {
        return fail("a '[' inside a class");
      } else {
        lo = next_cp();
      }
      uint32_t hi = lo;
      if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (at('\\')) {
          ++i_;
          std::vector<Range> set;
          bool neg = false;
          auto h = escape(&set, &neg);
          if (!h.ok()) return h.status();
          hi = *h;
          if (!set.empty()) return fail("a class escape as a range's end");
        } else {
          hi = next_cp();
        }
        if (hi < lo) return fail("a reversed range");
      }
      rs.push_back({lo, std::min(hi, kMaxCp)});
    }
    if (!at(']')) return fail("an unterminated '['");
    ++i_;
    std::string g = class_grammar(rs, negated);
    if (g.empty()) return fail("a class nothing matches");
    return g;
  }

  Result<std::string> atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (at('?')) {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
          i_ += 2;
        } else {
          return fail("a '(?' group (lookaround or a named group)");
        }
      }
      if (++depth_ > 64) return fail("groups nested over 64 deep");
      STRATA_ASSIGN(std::string inner, alternation());
      --depth_;
      if (!at(')')) return fail("an unterminated '('");
      ++i_;
      return inner;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return class_grammar({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true);
    }
    if (c == '\\') {
      ++i_;
      if (at('b') || at('B')) return fail("the word boundary '\\" + std::string(1, p_[i_]) + "'");
      if (i_ < p_.size() && p_[i_] >= '1' && p_[i_] <= '9') return fail("a backreference");
      std::vector<Range> set;
      bool neg = false;
      STRATA_ASSIGN(uint32_t cp, escape(&set, &neg));
      if (!set.empty()) return class_grammar(set, neg);
      return cp_literal(cp);
    }
    if (c == '^' || c == '$') return fail(std::string("the anchor '") + c + "' inside the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{')
      return fail(std::string("'") + c + "' with nothing to repeat");
    return cp_literal(next_cp());
  }
};

}  // namespace

Result<std::string> pattern_to_grammar(std::string_view pattern) {
  return PatternParser(pattern).run();
}

}  // namespace strata::server
