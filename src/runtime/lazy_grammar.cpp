#include "runtime/lazy_grammar.h"

#include <algorithm>

namespace strata {

LazyGrammarConstraint::LazyGrammarConstraint(std::shared_ptr<const Grammar> g,
                                             std::shared_ptr<const GrammarVocab> vocab, std::string trigger)
    : g_(std::move(g)), vocab_(std::move(vocab)), trigger_(std::move(trigger)), start_(g_) {}

std::vector<int32_t> LazyGrammarConstraint::spell(std::string_view text) const {
  if (!start_.can_accept(text)) return {};
  std::vector<int32_t> out;
  while (!text.empty()) {
    bool found = false;
    for (size_t len = std::min(text.size(), vocab_->max_len()); len > 0 && !found; --len) {
      const int32_t id = vocab_->find(text.substr(0, len));
      if (id >= 0) {
        out.push_back(id);
        text.remove_prefix(len);
        found = true;
      }
    }
    if (!found) return {};
  }
  return out;
}

bool LazyGrammarConstraint::allows(int32_t token) {
  if (inner_) return inner_->allows(token);
  if (token < 0 || token >= vocab_->n_vocab() || vocab_->is_eog(token)) return true;
  const std::string text = tail_ + vocab_->piece(token);
  const size_t at = text.find(trigger_);
  return at == std::string::npos || !spell(std::string_view(text).substr(at)).empty();
}

void LazyGrammarConstraint::filter(Candidates* c) {
  if (inner_) return inner_->filter(c);
  std::erase_if(c->data, [&](const Candidate& cd) { return !allows(cd.id); });
}

void LazyGrammarConstraint::accept(int32_t token) {
  if (inner_) return inner_->accept(token);
  if (token < 0 || token >= vocab_->n_vocab() || vocab_->is_eog(token)) return;
  std::string text = tail_ + vocab_->piece(token);
  const size_t at = text.find(trigger_);
  if (at == std::string::npos) {
    const size_t keep = std::min(text.size(), trigger_.size() - 1);
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
