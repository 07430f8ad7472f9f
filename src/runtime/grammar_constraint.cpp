#include "runtime/grammar_constraint.h"

#include <algorithm>
#include <cstdint>

namespace strata {

GrammarVocab::GrammarVocab(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  pieces_.resize(static_cast<size_t>(n));
  eog_.assign(static_cast<size_t>(n), 0);
  text_.assign(static_cast<size_t>(n), 0);
  for (int32_t id = 0; id < n; ++id) {
    const size_t i = static_cast<size_t>(id);
    eog_[i] = tok.is_eog(id) ? 1 : 0;
    if (eog_[i] || tok.is_control(id)) continue;
    pieces_[i] = tok.token_to_piece(id, false);
    if (pieces_[i].empty()) continue;
    text_[i] = 1;
    order_.push_back(id);
    max_len_ = std::max(max_len_, pieces_[i].size());
  }
  std::sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
    return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)];
  });
  lcp_.assign(order_.size(), 0);
  for (size_t k = 1; k < order_.size(); ++k) {
    const std::string& a = pieces_[static_cast<size_t>(order_[k - 1])];
    const std::string& b = pieces_[static_cast<size_t>(order_[k])];
    const size_t m = std::min(a.size(), b.size());
    uint32_t l = 0;
    while (l < m && a[l] == b[l]) ++l;
    lcp_[k] = l;
  }
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> g,
                                     std::shared_ptr<const GrammarVocab> vocab)
    : vocab_(std::move(vocab)), matcher_(std::move(g)) {}

void GrammarConstraint::look_up() {
  if (looked_up_) return;
  looked_up_ = true;
  const GrammarState& st = matcher_.state();
  key_.clear();
  auto put = [&](uint32_t v) { key_.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(st.cp);
  put(st.need);
  put(st.len);
  for (const GrammarStack& stack : *st.stacks) {
    put(static_cast<uint32_t>(stack.size()));
    for (uint32_t pos : stack) put(pos);
  }
  auto it = masks_.find(key_);
  mask_ = it == masks_.end() ? nullptr : &it->second;
}

bool GrammarConstraint::allows(int32_t token) {
  if (token < 0 || token >= vocab_->n_vocab()) return false;
  look_up();
  if (mask_) return (*mask_)[static_cast<size_t>(token)] != 0;
  if (vocab_->is_eog(token)) return matcher_.can_end();
  return vocab_->has_text(token) && matcher_.can_accept(vocab_->piece(token));
}

void GrammarConstraint::allowed_tokens(std::vector<uint8_t>* allowed) {
  const GrammarVocab& v = *vocab_;
  const Grammar& g = matcher_.grammar();
  allowed->assign(static_cast<size_t>(v.n_vocab()), 0);
  if (matcher_.can_end())
    for (int32_t id = 0; id < v.n_vocab(); ++id)
      if (v.is_eog(id)) (*allowed)[static_cast<size_t>(id)] = 1;
  walk_.resize(v.max_len() + 1);
  walk_[0] = matcher_.state();
  // valid: walk_[0..valid] hold the states of the previous token's prefixes; dead: that token's
  // prefix of this length was rejected (so is every token sharing it).
  size_t valid = 0;
  size_t dead = SIZE_MAX;
  const std::vector<int32_t>& order = v.order();
  for (size_t k = 0; k < order.size(); ++k) {
    const std::string& p = v.piece(order[k]);
    const size_t shared = v.lcp()[k];
    if (dead != SIZE_MAX && shared >= dead) continue;  // starts with the rejected prefix
    dead = SIZE_MAX;
    size_t d = std::min(valid, shared);
    for (; d < p.size(); ++d) {
      if (!grammar_advance_byte(g, walk_[d], static_cast<uint8_t>(p[d]), &walk_[d + 1])) break;
    }
    if (d < p.size()) {
      dead = d + 1;
      valid = d;
      continue;
    }
    valid = p.size();
    (*allowed)[static_cast<size_t>(order[k])] = 1;
  }
}

void GrammarConstraint::filter(Candidates* c) {
  look_up();
  if (!mask_) {
    const size_t n = static_cast<size_t>(vocab_->n_vocab());
    if ((masks_.size() + 1) * std::max<size_t>(n, 1) > kMaskCacheBytes) masks_.clear();
    std::vector<uint8_t>& m = masks_[key_];
    allowed_tokens(&m);
    mask_ = &m;
  }
  const std::vector<uint8_t>& m = *mask_;
  const int32_t n = vocab_->n_vocab();
  std::erase_if(c->data, [&](const Candidate& cd) {
    return cd.id < 0 || cd.id >= n || !m[static_cast<size_t>(cd.id)];
  });
}

void GrammarConstraint::accept(int32_t token) {
  if (token < 0 || token >= vocab_->n_vocab() || vocab_->is_eog(token)) return;
  matcher_.accept(vocab_->piece(token));
  looked_up_ = false;
  mask_ = nullptr;
}

}  // namespace strata
