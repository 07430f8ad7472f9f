#include "runtime/lazy_grammar.h"

#include <algorithm>

namespace strata {

LazyGrammarConstraint::LazyGrammarConstraint(std::shared_ptr<const Grammar> g,
                                             std::shared_ptr<const GrammarVocab> vocab, std::string trigger)
    : g_(std::move(g)), vocab_(std::move(vocab)), trigger_(std::move(trigger)), start_(g_) {}

const std::string& LazyGrammarConstraint::text_of(int32_t token) const {
  return g_->names_token(token) ? vocab_->shown_text(token) : vocab_->piece(token);
}

std::vector<int32_t> LazyGrammarConstraint::spell(std::string_view text) const {
  std::vector<int32_t> out;
  GrammarMatcher m = start_;
  while (!text.empty()) {
    int32_t id = -1;
    size_t len = 0;
    for (int32_t t : g_->tokens()) {  // a control marker the grammar names: that token
      if (t >= vocab_->n_vocab() || vocab_->has_text(t)) continue;
      const std::string& s = vocab_->shown_text(t);
      if (!s.empty() && text.starts_with(s)) {
        id = t;
        len = s.size();
        break;
      }
    }
    for (size_t n = std::min(text.size(), vocab_->max_len()); id < 0 && n > 0; --n) {
      id = vocab_->find(text.substr(0, n));
      len = n;
    }
    if (id < 0) return {};
    // As GrammarConstraint::accept takes it: the token element where the grammar names it, else text.
    const bool as_token = g_->names_token(id) && m.accept_token(id);
    if (!as_token && (!vocab_->has_text(id) || !m.accept(vocab_->piece(id)))) return {};
    out.push_back(id);
    text.remove_prefix(len);
  }
  return out;
}

bool LazyGrammarConstraint::allows(int32_t token) {
  if (inner_) return inner_->allows(token);
  if (token < 0 || token >= vocab_->n_vocab() || vocab_->is_eog(token)) return true;
  const std::string text = tail_ + text_of(token);
  const size_t at = trigger_.empty() ? std::string::npos : text.find(trigger_);
  return at == std::string::npos || !spell(std::string_view(text).substr(at)).empty();
}

void LazyGrammarConstraint::filter(Candidates* c) {
  if (inner_) return inner_->filter(c);
  std::erase_if(c->data, [&](const Candidate& cd) { return !allows(cd.id); });
}

void LazyGrammarConstraint::accept(int32_t token) {
  if (inner_) return inner_->accept(token);
  if (token < 0 || token >= vocab_->n_vocab() || vocab_->is_eog(token)) return;
  std::string text = tail_ + text_of(token);
  const size_t at = trigger_.empty() ? std::string::npos : text.find(trigger_);
  if (at == std::string::npos) {
    const size_t keep = std::min(text.size(), trigger_.empty() ? 0 : trigger_.size() - 1);
    tail_ = text.substr(text.size() - keep);
    return;
  }
  const std::vector<int32_t> spelled = spell(std::string_view(text).substr(at));
  tail_.clear();
  if (spelled.empty()) return;  // not allowed (allows() said so): the text stays free
  inner_ = std::make_unique<GrammarConstraint>(g_, vocab_);
  for (int32_t t : spelled) inner_->accept(t);
}

}  // namespace strata
