#include "runtime/grammar.h"

#include <algorithm>
#include <map>

namespace strata {

namespace {

constexpr int kMaxRepeat = 10000;              // {m,n} bounds at most this (each copy is elements)
constexpr int kMaxDepth = 200;                 // nested groups
constexpr size_t kMaxElems = size_t{1} << 20;  // elements of one alternative (repetitions copy theirs)

struct PElem {
  GrammarElem::Kind kind = GrammarElem::kChars;
  bool negated = false;
  uint32_t ref = 0;
  std::vector<GrammarRange> ranges;
};
using PAlt = std::vector<PElem>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

class GrammarBuilder {
 public:
  explicit GrammarBuilder(std::string_view text) : s_(text) {}

  Result<Grammar> build() {
    skip_space();
    while (pos_ < s_.size()) {
      STRATA_TRY(parse_rule());
      skip_space();
    }
    auto root = ids_.find("root");
    if (root == ids_.end() || !defined_[root->second]) return err("grammar: there is no 'root' rule");
    for (size_t r = 0; r < rules_.size(); ++r)
      if (!defined_[r]) return fail_at(used_at_[r], "rule '" + names_[r] + "' is not defined");
    STRATA_TRY(check_left_recursion());
    Grammar g;
    g.root_ = root->second;
    g.names_ = names_;
    g.alts_.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const PAlt& alt : rules_[r]) {
        g.alts_[r].push_back(static_cast<uint32_t>(g.elems_.size()));
        for (const PElem& e : alt) {
          GrammarElem ge;
          ge.kind = e.kind;
          ge.negated = e.negated;
          ge.ref = e.ref;
          ge.first = static_cast<uint32_t>(g.ranges_.size());
          ge.count = static_cast<uint32_t>(e.ranges.size());
          g.ranges_.insert(g.ranges_.end(), e.ranges.begin(), e.ranges.end());
          if (e.kind == GrammarElem::kChars && !e.negated && e.ranges.size() == 1 &&
              e.ranges[0].lo >= Grammar::kTokenBase)
            g.tokens_.push_back(static_cast<int32_t>(e.ranges[0].lo - Grammar::kTokenBase));
          g.elems_.push_back(ge);
        }
        g.elems_.push_back(GrammarElem{});
      }
    }
    std::sort(g.tokens_.begin(), g.tokens_.end());
    g.tokens_.erase(std::unique(g.tokens_.begin(), g.tokens_.end()), g.tokens_.end());
    return g;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  std::map<std::string, uint32_t, std::less<>> ids_;
  std::vector<std::string> names_;
  std::vector<std::vector<PAlt>> rules_;
  std::vector<bool> defined_;
  std::vector<size_t> used_at_;

  Status fail_at(size_t at, const std::string& what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return err("grammar %d:%d: %s", line, col, what.c_str());
  }
  Status fail(const std::string& what) const { return fail_at(pos_, what); }

  uint32_t rule_id(std::string_view name, size_t at) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(rules_.size());
    ids_.emplace(std::string(name), id);
    names_.emplace_back(name);
    rules_.emplace_back();
    defined_.push_back(false);
    used_at_.push_back(at);
    return id;
  }
  uint32_t new_rule(uint32_t parent) {
    const std::string base = names_[parent];
    for (int k = static_cast<int>(rules_.size());; ++k) {
      std::string name = base + "-" + std::to_string(k);
      if (ids_.count(name)) continue;
      const uint32_t id = rule_id(name, pos_);
      defined_[id] = true;
      return id;
    }
  }

  void skip_space() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  std::string_view name_at(size_t p) const {
    size_t e = p;
    while (e < s_.size() && is_name_char(s_[e])) ++e;
    return s_.substr(p, e - p);
  }
  // At `name ::=` (the start of the next rule)?
  bool at_rule_start() const {
    std::string_view n = name_at(pos_);
    if (n.empty()) return false;
    size_t p = pos_ + n.size();
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
    return s_.substr(p, 3) == "::=";
  }

  Status parse_rule() {
    const size_t at = pos_;
    std::string_view name = name_at(pos_);
    if (name.empty()) return fail("expected a rule name");
    pos_ += name.size();
    skip_space();
    if (s_.substr(pos_, 3) != "::=")
      return fail("expected '::=' after rule name '" + std::string(name) + "'");
    pos_ += 3;
    const uint32_t id = rule_id(name, at);
    if (defined_[id]) return fail_at(at, "rule '" + std::string(name) + "' is defined twice");
    defined_[id] = true;
    std::vector<PAlt> alts;
    STRATA_TRY(parse_alternates(id, 0, &alts));
    rules_[id] = std::move(alts);
    if (pos_ < s_.size() && !at_rule_start()) return fail("unexpected '" + std::string(1, s_[pos_]) + "'");
    return {};
  }

  Status parse_alternates(uint32_t rule, int depth, std::vector<PAlt>* out) {
    for (;;) {
      PAlt alt;
      STRATA_TRY(parse_sequence(rule, depth, &alt));
      out->push_back(std::move(alt));
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return {};
    }
  }

  Status parse_sequence(uint32_t rule, int depth, PAlt* out) {
    size_t last_start = out->size();  // the last symbol's first element (what a repetition repeats)
    bool have_last = false;
    for (;;) {
      skip_space();
      if (pos_ >= s_.size()) return {};
      const char c = s_[pos_];
      if (c == '|' || c == ')' || at_rule_start()) return {};
      if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) return fail(std::string("'") + c + "' follows nothing it could repeat");
        STRATA_TRY(parse_repetition(rule, last_start, out));
        have_last = false;
        continue;
      }
      last_start = out->size();
      have_last = true;
      const size_t start = pos_;
      if (c == '"') {
        ++pos_;
        bool empty = true;
        while (pos_ < s_.size() && s_[pos_] != '"') {
          uint32_t cp = 0;
          STRATA_TRY(parse_char(&cp));
          out->push_back(PElem{GrammarElem::kChars, false, 0, {{cp, cp}}});
          empty = false;
        }
        if (pos_ >= s_.size()) return fail_at(start, "unterminated string literal");
        ++pos_;
        if (empty) have_last = false;  // "" matches nothing to repeat
      } else if (c == '[') {
        ++pos_;
        PElem e;
        if (pos_ < s_.size() && s_[pos_] == '^') {
          e.negated = true;
          ++pos_;
        }
        while (pos_ < s_.size() && s_[pos_] != ']') {
          uint32_t lo = 0, hi = 0;
          STRATA_TRY(parse_char(&lo));
          hi = lo;
          if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
            ++pos_;
            STRATA_TRY(parse_char(&hi));
            if (hi < lo) return fail("character range is reversed");
          }
          e.ranges.push_back({lo, hi});
        }
        if (pos_ >= s_.size()) return fail_at(start, "unterminated character class");
        ++pos_;
        out->push_back(std::move(e));
      } else if (c == '<' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '[') {  // <[id]>: one token
        pos_ += 2;
        int64_t id = 0;
        const size_t digits = pos_;
        while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9' && id < Grammar::kMaxToken)
          id = id * 10 + (s_[pos_++] - '0');
        if (pos_ == digits) return fail("expected a token id in '<[id]>'");
        if (id >= Grammar::kMaxToken)
          return fail_at(digits, "token id is over " + std::to_string(Grammar::kMaxToken - 1));
        if (s_.substr(pos_, 2) != "]>") return fail("expected ']>' after token id " + std::to_string(id));
        pos_ += 2;
        const uint32_t cp = Grammar::kTokenBase + static_cast<uint32_t>(id);
        out->push_back(PElem{GrammarElem::kChars, false, 0, {{cp, cp}}});
      } else if (c == '.') {
        ++pos_;
        out->push_back(PElem{GrammarElem::kChars, true, 0, {}});
      } else if (c == '(') {
        if (depth >= kMaxDepth) return fail("groups nest too deeply");
        ++pos_;
        const uint32_t sub = new_rule(rule);
        std::vector<PAlt> alts;
        STRATA_TRY(parse_alternates(sub, depth + 1, &alts));
        if (pos_ >= s_.size() || s_[pos_] != ')') return fail("expected ')'");
        ++pos_;
        rules_[sub] = std::move(alts);
        out->push_back(PElem{GrammarElem::kRef, false, sub, {}});
      } else if (is_name_char(c)) {
        const size_t at = pos_;
        std::string_view name = name_at(pos_);
        pos_ += name.size();
        out->push_back(PElem{GrammarElem::kRef, false, rule_id(name, at), {}});
      } else {
        return fail("unexpected '" + std::string(1, c) + "'");
      }
    }
  }

  Status parse_int(int* out) {
    const size_t start = pos_;
    long v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_] - '0');
      if (v > kMaxRepeat) return fail_at(start, "repetition count is over " + std::to_string(kMaxRepeat));
      ++pos_;
    }
    if (pos_ == start) return fail("expected a number");
    *out = static_cast<int>(v);
    return {};
  }

  // The last symbol (out[last_start..]) repeated: * + ? {m} {m,} {m,n}.
  Status parse_repetition(uint32_t rule, size_t last_start, PAlt* out) {
    int lo = 0, hi = -1;  // hi < 0: unbounded
    const char c = s_[pos_++];
    if (c == '+') {
      lo = 1;
    } else if (c == '?') {
      hi = 1;
    } else if (c == '{') {
      skip_space();
      STRATA_TRY(parse_int(&lo));
      skip_space();
      hi = lo;
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        skip_space();
        hi = -1;
        if (pos_ < s_.size() && s_[pos_] != '}') STRATA_TRY(parse_int(&hi));
        skip_space();
      }
      if (pos_ >= s_.size() || s_[pos_] != '}') return fail("expected '}'");
      ++pos_;
      if (hi >= 0 && hi < lo) return fail("repetition {m,n} has n < m");
    }
    const size_t copies = static_cast<size_t>(std::max(lo, hi)) + 1;
    if ((out->size() - last_start) * copies + last_start > kMaxElems)
      return fail("repetition makes the grammar too large (over " + std::to_string(kMaxElems) + " elements)");
    const PAlt item(out->begin() + static_cast<std::ptrdiff_t>(last_start), out->end());
    out->resize(last_start);
    for (int i = 0; i < lo; ++i) out->insert(out->end(), item.begin(), item.end());
    if (hi < 0) {  // R ::= item R | ""
      const uint32_t r = new_rule(rule);
      PAlt again = item;
      again.push_back(PElem{GrammarElem::kRef, false, r, {}});
      rules_[r] = {std::move(again), PAlt{}};
      out->push_back(PElem{GrammarElem::kRef, false, r, {}});
    } else if (hi > lo) {  // R1 ::= item | "";  Rk ::= item R(k-1) | ""
      uint32_t prev = 0;
      for (int k = 1; k <= hi - lo; ++k) {
        const uint32_t r = new_rule(rule);
        PAlt a = item;
        if (k > 1) a.push_back(PElem{GrammarElem::kRef, false, prev, {}});
        rules_[r] = {std::move(a), PAlt{}};
        prev = r;
      }
      out->push_back(PElem{GrammarElem::kRef, false, prev, {}});
    }
    return {};
  }

  // One character of a literal or class (UTF-8 decoded, escapes resolved).
  Status parse_char(uint32_t* cp) {
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      if (pos_ + 1 >= s_.size()) return fail("unterminated escape");
      const char e = s_[pos_ + 1];
      pos_ += 2;
      int digits = 0;
      switch (e) {
        case 'n':
          *cp = '\n';
          return {};
        case 'r':
          *cp = '\r';
          return {};
        case 't':
          *cp = '\t';
          return {};
        case '0':
          *cp = 0;
          return {};
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '.':
          *cp = static_cast<unsigned char>(e);
          return {};
        case 'x':
          digits = 2;
          break;
        case 'u':
          digits = 4;
          break;
        case 'U':
          digits = 8;
          break;
        default:
          return fail_at(pos_ - 2, std::string("unknown escape '\\") + e + "'");
      }
      uint32_t v = 0;
      for (int i = 0; i < digits; ++i) {
        const int h = pos_ < s_.size() ? hex_value(s_[pos_]) : -1;
        if (h < 0) return fail("expected " + std::to_string(digits) + " hex digits");
        v = v * 16 + static_cast<uint32_t>(h);
        ++pos_;
      }
      if (v > 0x10FFFF) return fail("code point beyond U+10FFFF");
      *cp = v;
      return {};
    }
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > s_.size()) return fail("invalid UTF-8");
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; ++i) {
      const unsigned char b = static_cast<unsigned char>(s_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) return fail("invalid UTF-8");
      v = (v << 6) | (b & 0x3F);
    }
    pos_ += static_cast<size_t>(n);
    *cp = v;
    return {};
  }

  // A rule that can reach itself without consuming a character would make the matcher loop.
  Status check_left_recursion() const {
    const size_t n = rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const PAlt& alt : rules_[r]) {
          bool all = true;
          for (const PElem& e : alt) all = all && e.kind == GrammarElem::kRef && nullable[e.ref];
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // left[r]: rules that r can start with (through nullable prefixes).
    std::vector<std::vector<uint32_t>> left(n);
    for (size_t r = 0; r < n; ++r)
      for (const PAlt& alt : rules_[r])
        for (const PElem& e : alt) {
          if (e.kind != GrammarElem::kRef) break;
          left[r].push_back(e.ref);
          if (!nullable[e.ref]) break;
        }
    std::vector<int> state(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (size_t start = 0; start < n; ++start) {
      if (state[start]) continue;
      stack.push_back({static_cast<uint32_t>(start), 0});
      state[start] = 1;
      while (!stack.empty()) {
        auto& [r, i] = stack.back();
        if (i == left[r].size()) {
          state[r] = 2;
          stack.pop_back();
          continue;
        }
        const uint32_t next = left[r][i++];
        if (state[next] == 1) return err("grammar: rule '%s' is left-recursive", names_[next].c_str());
        if (state[next] == 0) {
          state[next] = 1;
          stack.push_back({next, 0});
        }
      }
    }
    return {};
  }
};

Result<Grammar> Grammar::parse(std::string_view text) {
  return GrammarBuilder(text).build();
}

bool Grammar::names_token(int32_t id) const {
  return std::binary_search(tokens_.begin(), tokens_.end(), id);
}

bool Grammar::matches(const GrammarElem& e, uint32_t cp) const {
  if (e.negated && cp >= kTokenBase) return false;  // `.` and [^...] match text only
  bool in = false;
  for (uint32_t i = e.first; i < e.first + e.count && !in; ++i)
    in = cp >= ranges_[i].lo && cp <= ranges_[i].hi;
  return in != e.negated;
}

bool Grammar::matches_any(const GrammarElem& e, uint32_t lo, uint32_t hi) const {
  if (!e.negated) {
    for (uint32_t i = e.first; i < e.first + e.count; ++i)
      if (ranges_[i].lo <= hi && ranges_[i].hi >= lo) return true;
    return false;
  }
  // Negated: some code point of [lo, hi] lies outside every range. Walk up from lo.
  uint32_t cp = lo;
  for (bool moved = true; moved && cp <= hi;) {
    moved = false;
    for (uint32_t i = e.first; i < e.first + e.count; ++i)
      if (cp >= ranges_[i].lo && cp <= ranges_[i].hi) {
        if (ranges_[i].hi >= hi) return false;
        cp = ranges_[i].hi + 1;
        moved = true;
      }
  }
  return cp <= hi;
}

}  // namespace strata
