#include "runtime/grammar_matcher.h"

#include <algorithm>

namespace strata {

namespace {

// Pushes `stack` with its top expanded (references opened, finished alternatives popped) to out.
void expand(const Grammar& g, GrammarStack stack, GrammarStacks* out) {
  const auto& elems = g.elems();
  while (!stack.empty() && elems[stack.back()].kind == GrammarElem::kEnd) stack.pop_back();
  if (stack.empty() || elems[stack.back()].kind == GrammarElem::kChars) {
    out->push_back(std::move(stack));
    return;
  }
  const uint32_t pos = stack.back();
  const uint32_t rule = elems[pos].ref;
  // The caller continues after the reference; nothing left of it (a tail call) is dropped, so
  // repetitions (R ::= x R) do not grow the stack.
  if (elems[pos + 1].kind == GrammarElem::kEnd) {
    stack.pop_back();
  } else {
    stack.back() = pos + 1;
  }
  for (uint32_t alt : g.alternatives(rule)) {
    GrammarStack s = stack;
    s.push_back(alt);
    expand(g, std::move(s), out);
  }
}

void normalize(GrammarStacks* s) {
  std::sort(s->begin(), s->end());
  s->erase(std::unique(s->begin(), s->end()), s->end());
}

}  // namespace

bool grammar_advance_cp(const Grammar& g, const GrammarStacks& in, uint32_t cp, GrammarStacks* out) {
  out->clear();
  for (const GrammarStack& st : in) {
    if (st.empty() || !g.matches(g.elems()[st.back()], cp)) continue;
    GrammarStack next = st;
    ++next.back();
    expand(g, std::move(next), out);
  }
  if (out->empty()) return false;
  normalize(out);
  return true;
}

GrammarState grammar_start(const Grammar& g) {
  auto stacks = std::make_shared<GrammarStacks>();
  for (uint32_t alt : g.alternatives(g.root())) expand(g, GrammarStack{alt}, stacks.get());
  normalize(stacks.get());
  GrammarState s;
  s.stacks = std::move(stacks);
  return s;
}

GrammarUtf8Step grammar_utf8_step(const Grammar& g, const GrammarState& in, uint8_t b, GrammarState* partial,
                                  uint32_t* cp_out) {
  uint32_t cp = 0;
  uint8_t need = 0, len = 1;
  if (in.need == 0) {
    if (b < 0x80) {
      cp = b;
    } else if ((b & 0xE0) == 0xC0) {
      cp = b & 0x1F;
      need = 1;
    } else if ((b & 0xF0) == 0xE0) {
      cp = b & 0x0F;
      need = 2;
    } else if ((b & 0xF8) == 0xF0) {
      cp = b & 0x07;
      need = 3;
    } else {
      return GrammarUtf8Step::kReject;  // a continuation byte or an invalid lead
    }
    len = static_cast<uint8_t>(need + 1);
  } else {
    if ((b & 0xC0) != 0x80) return GrammarUtf8Step::kReject;
    cp = (in.cp << 6) | (b & 0x3F);
    need = static_cast<uint8_t>(in.need - 1);
    len = in.len;
  }
  // The code points this character can still be: its shortest form only, no surrogates.
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  const uint32_t lo = std::max(cp << (6 * need), kMin[len]);
  const uint32_t hi = std::min((cp << (6 * need)) | ((1u << (6 * need)) - 1), 0x10FFFFu);
  if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return GrammarUtf8Step::kReject;
  if (need > 0) {  // unfinished: some top must admit a code point that starts so
    bool any = false;
    for (const GrammarStack& st : *in.stacks)
      if (!st.empty() && g.matches_any(g.elems()[st.back()], lo, hi)) {
        any = true;
        break;
      }
    if (!any) return GrammarUtf8Step::kReject;
    partial->stacks = in.stacks;
    partial->cp = cp;
    partial->need = need;
    partial->len = len;
    return GrammarUtf8Step::kPartial;
  }
  *cp_out = cp;
  return GrammarUtf8Step::kChar;
}

bool grammar_advance_byte(const Grammar& g, const GrammarState& in, uint8_t b, GrammarState* out) {
  uint32_t cp = 0;
  const GrammarUtf8Step step = grammar_utf8_step(g, in, b, out, &cp);
  if (step != GrammarUtf8Step::kChar) return step == GrammarUtf8Step::kPartial;
  auto next = std::make_shared<GrammarStacks>();
  if (!grammar_advance_cp(g, *in.stacks, cp, next.get())) return false;
  out->stacks = std::move(next);
  out->cp = 0;
  out->need = 0;
  out->len = 0;
  return true;
}

bool grammar_advance_token(const Grammar& g, const GrammarState& in, int32_t id, GrammarState* out) {
  if (in.need != 0 || id < 0 || id >= Grammar::kMaxToken) return false;
  auto next = std::make_shared<GrammarStacks>();
  if (!grammar_advance_cp(g, *in.stacks, Grammar::kTokenBase + static_cast<uint32_t>(id), next.get()))
    return false;
  *out = GrammarState{};
  out->stacks = std::move(next);
  return true;
}

bool grammar_can_end(const GrammarState& s) {
  if (s.need != 0) return false;
  for (const GrammarStack& st : *s.stacks)
    if (st.empty()) return true;
  return false;
}

bool grammar_complete(const GrammarState& s) {
  return s.need == 0 && s.stacks->size() == 1 && s.stacks->front().empty();
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g)
    : g_(std::move(g)), state_(grammar_start(*g_)) {}

bool GrammarMatcher::accept(std::string_view bytes) {
  GrammarState s = state_;
  for (char c : bytes)
    if (!grammar_advance_byte(*g_, s, static_cast<uint8_t>(c), &s)) return false;
  state_ = std::move(s);
  return true;
}

bool GrammarMatcher::can_accept(std::string_view bytes) const {
  GrammarState s = state_;
  for (char c : bytes)
    if (!grammar_advance_byte(*g_, s, static_cast<uint8_t>(c), &s)) return false;
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  GrammarState s;
  if (!grammar_advance_token(*g_, state_, id, &s)) return false;
  state_ = std::move(s);
  return true;
}

bool grammar_matches(const Grammar& g, std::string_view text) {
  GrammarState s = grammar_start(g);
  for (char c : text)
    if (!grammar_advance_byte(g, s, static_cast<uint8_t>(c), &s)) return false;
  return grammar_can_end(s);
}

}  // namespace strata
