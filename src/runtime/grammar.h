// GBNF grammars in llama.cpp's syntax, so users' grammars carry over:
//
//   root   ::= "{" ws pair ("," ws pair)* "}"      # rules; the start rule is `root`
//   pair   ::= [a-z]+ ":" ws ("yes" | "no")        # alternatives, groups, char classes
//   ws     ::= [ \t\n]{0,4}                         # * + ? {m} {m,} {m,n}; [^...] negation; . any char
//
// `<[id]>` matches the single token with that id (a control token has no text to spell it: tool-call
// markers such as Llama's <|python_tag|> or Mistral's [TOOL_CALLS] as one token); `.` and negated
// classes never match a token. Literals and classes take the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH
// \UHHHHHHHH; `#` starts a comment; names are letters, digits, '-' and '_'. Whitespace (newlines included)
// separates elements; a new rule starts where `name ::=` follows. Repetitions and groups become rules of
// their own (named `parent-N` in messages), so a Grammar is plain rules of alternatives of
// elements, each a set of code points or a reference to a rule (a token is code point
// kTokenBase + id, beyond Unicode, so no text can match it). Left recursion (direct or through
// rules that can match nothing) is an error, as an undefined rule or a missing `root` is; every
// error names the line and column ("grammar 3:14: ...").
//
//   auto g = Grammar::parse(text);                  // Result<Grammar>
//   GrammarMatcher m(g);  m.accept_bytes("{a: yes}");  m.can_end();   (runtime/grammar_matcher.h)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace strata {

struct GrammarElem {
  enum Kind : uint8_t {
    kEnd,    // closes an alternative
    kChars,  // one code point in ranges (or not in them, negated)
    kRef,    // the rule `ref`
  };
  Kind kind = kEnd;
  bool negated = false;
  uint32_t ref = 0;
  uint32_t first = 0, count = 0;  // kChars: Grammar::ranges[first, first + count)
};

struct GrammarRange {
  uint32_t lo, hi;  // inclusive code points
};

class Grammar {
 public:
  static Result<Grammar> parse(std::string_view text);
  static constexpr uint32_t kTokenBase = 0x110000;  // token id t is code point kTokenBase + t
  static constexpr int32_t kMaxToken = 1 << 24;     // `<[id]>` ids are below this

  // The token ids the grammar names (`<[id]>`), ascending.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  bool names_token(int32_t id) const;

  // Every alternative is a run of elements ending with kEnd; rule r's alternatives start at
  // alternatives(r)[i] (indices into elems()).
  const std::vector<GrammarElem>& elems() const { return elems_; }
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return alts_[rule]; }
  const std::vector<GrammarRange>& ranges() const { return ranges_; }
  uint32_t root() const { return root_; }
  size_t n_rules() const { return alts_.size(); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  // Whether kChars element e admits code point cp.
  bool matches(const GrammarElem& e, uint32_t cp) const;
  // Whether kChars element e admits some code point in [lo, hi].
  bool matches_any(const GrammarElem& e, uint32_t lo, uint32_t hi) const;

 private:
  friend class GrammarBuilder;
  std::vector<GrammarElem> elems_;
  std::vector<std::vector<uint32_t>> alts_;
  std::vector<GrammarRange> ranges_;
  std::vector<std::string> names_;
  std::vector<int32_t> tokens_;
  uint32_t root_ = 0;
};

}  // namespace strata
