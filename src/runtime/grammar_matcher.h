// Incremental matching of text against a Grammar (runtime/grammar.h), byte by byte.
//
// The state is a set of stacks, as in a pushdown automaton: each stack is the positions (indices
// into Grammar::elems()) still to match, innermost last; every top is a character set, and an empty
// stack means the text so far is a whole sentence of the grammar. A code point advances every stack
// whose top admits it (then references are expanded until each top is a character set again);
// stacks that do not admit it are dropped, and a state without stacks rejects. Bytes are decoded as
// UTF-8: the bytes of an unfinished code point are held (a token may end inside a character) and
// rejected as soon as no stack's top can admit any code point starting with them. Overlong forms,
// surrogates and code points beyond U+10FFFF are rejected (byte tokens could otherwise spell '{' in
// four bytes).
//
//   GrammarMatcher m(grammar);
//   m.accept("{\"a\"");        // false: rejected, and the state is as before
//   m.can_end();               // the text so far is a sentence
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "runtime/grammar.h"

namespace strata {

using GrammarStack = std::vector<uint32_t>;
using GrammarStacks = std::vector<GrammarStack>;  // sorted, unique

// A matcher's position: the stacks and an unfinished UTF-8 code point (need > 0 bytes to come).
struct GrammarState {
  std::shared_ptr<const GrammarStacks> stacks;
  uint32_t cp = 0;
  uint8_t need = 0;
  uint8_t len = 0;  // the unfinished character's bytes in all
};

// The start state (root expanded).
GrammarState grammar_start(const Grammar& g);
// Advances `in` by one byte into *out; false (out unspecified) when the grammar rejects it. It is
// grammar_utf8_step and, when a character is complete, grammar_advance_cp.
bool grammar_advance_byte(const Grammar& g, const GrammarState& in, uint8_t byte, GrammarState* out);
// The UTF-8 half of a byte: rejected; kPartial: the character is unfinished, *partial holds it
// (some top can still admit it); kChar: code point *cp is complete (not yet matched).
enum class GrammarUtf8Step : uint8_t { kReject, kPartial, kChar };
GrammarUtf8Step grammar_utf8_step(const Grammar& g, const GrammarState& in, uint8_t byte,
                                  GrammarState* partial, uint32_t* cp);
// Advances every stack whose top admits cp into *out (sorted, unique); false when none does.
bool grammar_advance_cp(const Grammar& g, const GrammarStacks& in, uint32_t cp, GrammarStacks* out);
// Advances `in` by token `id` (a `<[id]>` element, runtime/grammar.h) into *out; false when the
// grammar rejects it there (or a character is unfinished).
bool grammar_advance_token(const Grammar& g, const GrammarState& in, int32_t id, GrammarState* out);
// The text so far is a whole sentence (no unfinished character, some empty stack).
bool grammar_can_end(const GrammarState& s);
// Nothing can follow: the only stack is the empty one.
bool grammar_complete(const GrammarState& s);

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> g);

  // Advances by all of `bytes`; false (and the state unchanged) when some byte is rejected.
  bool accept(std::string_view bytes);
  // Whether `bytes` would be accepted, leaving the state as it is.
  bool can_accept(std::string_view bytes) const;
  // Advances by token `id` (`<[id]>`); false (and the state unchanged) when it is rejected.
  bool accept_token(int32_t id);
  bool can_end() const { return grammar_can_end(state_); }
  bool complete() const { return grammar_complete(state_); }
  const GrammarState& state() const { return state_; }
  const Grammar& grammar() const { return *g_; }

 private:
  std::shared_ptr<const Grammar> g_;
  GrammarState state_;
};

// Whether the whole of `text` is a sentence of g (tests, tools).
bool grammar_matches(const Grammar& g, std::string_view text);

}  // namespace strata
