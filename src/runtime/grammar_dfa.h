// The matcher's states (runtime/grammar_matcher.h) as a lazily built automaton: each state met is
// interned once (an id per distinct set of stacks and unfinished character) and its successor by
// each byte is computed by the matcher's grammar_utf8_step / grammar_advance_cp the first time it
// is asked for, then read from a table. A completed character's successor depends only on which
// stacks' tops admit it, so that is computed once per set of stacks and set of admitting stacks:
// the thousands of CJK characters inside a JSON string all lead back by one computed step. Text in a grammar
// mostly revisits few states (inside a JSON string every ordinary byte leads back to the same one), so
// walking a vocabulary's byte trie becomes table lookups after the first few tokens, and checking a drawn
// token is a few loads. It is a cache over the one matcher, not a second grammar engine: every transition is
// the matcher's.
//
//   GrammarDfa dfa(grammar);
//   int32_t s = dfa.start();
//   s = dfa.next(s, '{');            // GrammarDfa::kReject when the grammar rejects the byte
//   grammar_can_end(dfa.state(s));
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/grammar_matcher.h"

namespace strata {

class GrammarDfa {
 public:
  static constexpr int32_t kReject = -1;

  explicit GrammarDfa(std::shared_ptr<const Grammar> g);

  int32_t start();
  // The id of state s, interning it when it is new.
  int32_t intern(const GrammarState& s);
  // The state after byte b from state id; kReject when the grammar rejects b there.
  int32_t next(int32_t id, uint8_t b) {
    const int32_t t = next_[static_cast<size_t>(id) * 256 + b];
    return t != kUnknown ? t : compute(id, b);
  }
  // The state after token `token` (a `<[id]>` element); kReject when the grammar rejects it there.
  int32_t next_token(int32_t id, int32_t token);
  // The state after all of `bytes`; kReject when some byte is rejected.
  int32_t walk(int32_t id, std::string_view bytes) {
    for (char c : bytes) {
      id = next(id, static_cast<uint8_t>(c));
      if (id < 0) return kReject;
    }
    return id;
  }
  const GrammarState& state(int32_t id) const { return states_[static_cast<size_t>(id)]; }
  size_t size() const { return states_.size(); }
  // Forgets every state (ids are then invalid); bounds the memory of a long request.
  void clear();
  const Grammar& grammar() const { return *g_; }

 private:
  static constexpr int32_t kUnknown = -2;
  std::shared_ptr<const Grammar> g_;
  std::vector<GrammarState> states_;
  std::vector<int32_t> stacks_of_;                       // per state: its stacks' id
  std::vector<int32_t> next_;                            // [state][byte]: a state id, kReject or kUnknown
  std::unordered_map<std::string, int32_t> stacks_ids_;  // serialized stacks -> stacks id
  std::vector<std::shared_ptr<const GrammarStacks>> stacks_;
  // Per stacks id: (which stacks admit the character, as bits) -> the next stacks id.
  std::vector<std::unordered_map<uint64_t, int32_t>> by_admitting_;
  std::unordered_map<uint64_t, int32_t> ids_;       // (stacks id, unfinished character) -> state id
  std::unordered_map<uint64_t, int32_t> by_token_;  // (state id, token) -> state id or kReject
  std::string key_;
  int32_t compute(int32_t id, uint8_t b);
  int32_t stacks_id(std::shared_ptr<const GrammarStacks> stacks);
  int32_t state_id(int32_t stacks, const GrammarState& s);
};

}  // namespace strata
