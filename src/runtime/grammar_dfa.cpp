#include "runtime/grammar_dfa.h"

namespace strata {

GrammarDfa::GrammarDfa(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {}

int32_t GrammarDfa::start() {
  return intern(grammar_start(*g_));
}

int32_t GrammarDfa::stacks_id(std::shared_ptr<const GrammarStacks> stacks) {
  key_.clear();
  auto put = [&](uint32_t v) { key_.append(reinterpret_cast<const char*>(&v), sizeof v); };
  for (const GrammarStack& stack : *stacks) {
    put(static_cast<uint32_t>(stack.size()));
    for (uint32_t pos : stack) put(pos);
  }
  auto [it, added] = stacks_ids_.try_emplace(key_, static_cast<int32_t>(stacks_.size()));
  if (added) {
    stacks_.push_back(std::move(stacks));
    by_admitting_.emplace_back();
  }
  return it->second;
}

int32_t GrammarDfa::state_id(int32_t stacks, const GrammarState& s) {
  // cp < 2^21, need < 4, len < 5: one 64-bit key with the stacks id.
  const uint64_t key = (uint64_t{static_cast<uint32_t>(stacks)} << 32) | (uint64_t{s.cp} << 8) |
                       (uint64_t{s.need} << 4) | s.len;
  auto [it, added] = ids_.try_emplace(key, static_cast<int32_t>(states_.size()));
  if (added) {
    GrammarState st = s;
    st.stacks = stacks_[static_cast<size_t>(stacks)];  // one copy of each set of stacks
    states_.push_back(std::move(st));
    stacks_of_.push_back(stacks);
    next_.resize(next_.size() + 256, kUnknown);
  }
  return it->second;
}

int32_t GrammarDfa::intern(const GrammarState& s) {
  return state_id(stacks_id(s.stacks), s);
}

int32_t GrammarDfa::compute(int32_t id, uint8_t b) {
  const size_t i = static_cast<size_t>(id);
  const GrammarState in = states_[i];  // a copy: interning may grow states_
  const int32_t in_stacks = stacks_of_[i];
  GrammarState partial;
  uint32_t cp = 0;
  int32_t t = kReject;
  switch (grammar_utf8_step(*g_, in, b, &partial, &cp)) {
    case GrammarUtf8Step::kReject:
      break;
    case GrammarUtf8Step::kPartial:
      t = state_id(in_stacks, partial);  // the same stacks, a character under way
      break;
    case GrammarUtf8Step::kChar: {
      const GrammarStacks& stacks = *in.stacks;
      const Grammar& g = *g_;
      uint64_t admitting = 0;
      const bool keyed = stacks.size() <= 64;
      for (size_t k = 0; keyed && k < stacks.size(); ++k)
        if (!stacks[k].empty() && g.matches(g.elems()[stacks[k].back()], cp)) admitting |= uint64_t{1} << k;
      if (keyed && admitting == 0) break;
      int32_t next_stacks = kReject;
      auto& cache = by_admitting_[static_cast<size_t>(in_stacks)];
      if (auto it = keyed ? cache.find(admitting) : cache.end(); it != cache.end()) {
        next_stacks = it->second;
      } else {
        auto out = std::make_shared<GrammarStacks>();
        if (grammar_advance_cp(g, stacks, cp, out.get())) next_stacks = stacks_id(std::move(out));
        if (keyed) by_admitting_[static_cast<size_t>(in_stacks)][admitting] = next_stacks;
      }
      if (next_stacks != kReject) t = state_id(next_stacks, GrammarState{});
      break;
    }
  }
  next_[i * 256 + b] = t;
  return t;
}

int32_t GrammarDfa::next_token(int32_t id, int32_t token) {
  const uint64_t key = (uint64_t{static_cast<uint32_t>(id)} << 32) | static_cast<uint32_t>(token);
  if (auto it = by_token_.find(key); it != by_token_.end()) return it->second;
  GrammarState out;
  const GrammarState in = states_[static_cast<size_t>(id)];  // a copy: interning may grow states_
  const int32_t t = grammar_advance_token(*g_, in, token, &out) ? intern(out) : kReject;
  by_token_[key] = t;
  return t;
}

void GrammarDfa::clear() {
  by_token_.clear();
  states_.clear();
  stacks_of_.clear();
  next_.clear();
  stacks_ids_.clear();
  stacks_.clear();
  by_admitting_.clear();
  ids_.clear();
}

}  // namespace strata
