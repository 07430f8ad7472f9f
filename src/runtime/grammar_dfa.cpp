#include "runtime/grammar_dfa.h"

namespace strata {

GrammarDfa::GrammarDfa(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {}

int32_t GrammarDfa::start() {
  return intern(grammar_start(*g_));
}

int32_t GrammarDfa::intern(const GrammarState& s) {
  key_.clear();
  auto put = [&](uint32_t v) { key_.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(s.cp);
  put(s.need);
  put(s.len);
  for (const GrammarStack& stack : *s.stacks) {
    put(static_cast<uint32_t>(stack.size()));
    for (uint32_t pos : stack) put(pos);
  }
  auto [it, added] = ids_.try_emplace(key_, static_cast<int32_t>(states_.size()));
  if (added) {
    states_.push_back(s);
    next_.resize(next_.size() + 256, kUnknown);
  }
  return it->second;
}

int32_t GrammarDfa::compute(int32_t id, uint8_t b) {
  GrammarState out;
  int32_t t = kReject;
  // A copy: interning may grow states_ under a reference.
  const GrammarState in = states_[static_cast<size_t>(id)];
  if (grammar_advance_byte(*g_, in, b, &out)) t = intern(out);
  next_[static_cast<size_t>(id) * 256 + b] = t;
  return t;
}

void GrammarDfa::clear() {
  states_.clear();
  next_.clear();
  ids_.clear();
}

}  // namespace strata
