#include "runtime/grammar_constraint.h"

#include <algorithm>
#include <cstdint>

namespace strata {

int32_t GrammarVocab::find(std::string_view text) const {
  if (text.empty()) return -1;
  uint32_t lo = 0, hi = static_cast<uint32_t>(trie_.size());  // the candidates' range: siblings at depth d
  for (size_t d = 0; d < text.size(); ++d) {
    const uint8_t b = static_cast<uint8_t>(text[d]);
    uint32_t j = lo;
    while (j < hi && trie_[j].byte != b) j = trie_[j].end;  // skip a sibling's subtree
    if (j >= hi) return -1;
    if (d + 1 == text.size()) {
      const TrieNode& n = trie_[j];
      int32_t best = -1;
      for (uint32_t k = n.tok_begin; k < n.tok_end; ++k)
        if (best < 0 || trie_tokens_[k] < best) best = trie_tokens_[k];
      return best;
    }
    lo = j + 1;
    hi = trie_[j].end;
  }
  return -1;
}

GrammarVocab::GrammarVocab(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  pieces_.resize(static_cast<size_t>(n));
  eog_.assign(static_cast<size_t>(n), 0);
  for (int32_t id = 0; id < n; ++id) {
    const size_t i = static_cast<size_t>(id);
    eog_[i] = tok.is_eog(id) ? 1 : 0;
    if (eog_[i]) continue;
    if (tok.is_control(id)) {
      if (std::string t = tok.token_to_piece(id, true); !t.empty()) control_.emplace(id, std::move(t));
      continue;
    }
    pieces_[i] = tok.token_to_piece(id, false);
  }
  build();
}

GrammarVocab::GrammarVocab(std::vector<std::string> pieces, const std::vector<int32_t>& eog,
                           std::unordered_map<int32_t, std::string> control)
    : pieces_(std::move(pieces)), control_(std::move(control)) {
  for (const auto& [id, text] : control_)
    if (id >= 0 && static_cast<size_t>(id) < pieces_.size()) pieces_[static_cast<size_t>(id)].clear();
  eog_.assign(pieces_.size(), 0);
  for (int32_t id : eog)
    if (id >= 0 && static_cast<size_t>(id) < pieces_.size()) {
      eog_[static_cast<size_t>(id)] = 1;
      pieces_[static_cast<size_t>(id)].clear();
    }
  build();
}

void GrammarVocab::build() {
  const size_t n = pieces_.size();
  text_.assign(n, 0);
  std::vector<int32_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (eog_[i]) eog_ids_.push_back(static_cast<int32_t>(i));
    if (pieces_[i].empty()) continue;
    text_[i] = 1;
    order.push_back(static_cast<int32_t>(i));
    max_len_ = std::max(max_len_, pieces_[i].size());
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)];
  });
  // In byte order, a token's nodes are its path's: those of the shared prefix with the previous
  // token already exist, the rest are new; a node's subtree ends where a shorter path starts.
  std::vector<uint32_t> path;  // node index per depth on the current path
  const std::string* prev = nullptr;
  auto close_from = [&](size_t depth) {
    while (path.size() > depth) {
      trie_[path.back()].end = static_cast<uint32_t>(trie_.size());
      path.pop_back();
    }
  };
  for (int32_t id : order) {
    const std::string& p = pieces_[static_cast<size_t>(id)];
    size_t shared = 0;
    if (prev != nullptr) {
      const size_t m = std::min(prev->size(), p.size());
      while (shared < m && (*prev)[shared] == p[shared]) ++shared;
    }
    close_from(shared);
    for (size_t d = shared; d < p.size(); ++d) {
      path.push_back(static_cast<uint32_t>(trie_.size()));
      trie_.push_back({0, 0, 0, static_cast<uint32_t>(d), static_cast<uint8_t>(p[d])});
    }
    TrieNode& last = trie_[path.back()];
    if (last.tok_end == 0) last.tok_begin = last.tok_end = static_cast<uint32_t>(trie_tokens_.size());
    trie_tokens_.push_back(id);  // identical pieces are adjacent in byte order
    last.tok_end = static_cast<uint32_t>(trie_tokens_.size());
    prev = &p;
  }
  close_from(0);
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> g,
                                     std::shared_ptr<const GrammarVocab> vocab)
    : vocab_(std::move(vocab)), dfa_(std::move(g)), cur_(dfa_.start()) {
  for (int32_t t : dfa_.grammar().tokens())
    if (t < vocab_->n_vocab()) tokens_.push_back(t);
}

bool GrammarConstraint::allows(int32_t token) {
  if (token < 0 || token >= vocab_->n_vocab()) return false;
  if (const auto* m = mask_of(cur_)) return mask_allows(*m, token);
  if (token_step(token) >= 0) return true;
  if (vocab_->is_eog(token)) return can_end();
  return vocab_->has_text(token) && dfa_.walk(cur_, vocab_->piece(token)) >= 0;
}

void GrammarConstraint::allowed_tokens(std::vector<uint8_t>* allowed) {
  std::vector<uint64_t> bits;
  allowed_bits(&bits);
  allowed->assign(static_cast<size_t>(vocab_->n_vocab()), 0);
  for (size_t t = 0; t < allowed->size(); ++t) (*allowed)[t] = mask_allows(bits, static_cast<int32_t>(t));
}

void GrammarConstraint::allowed_bits(std::vector<uint64_t>* allowed) {
  const GrammarVocab& v = *vocab_;
  allowed->assign((static_cast<size_t>(v.n_vocab()) + 63) / 64, 0);
  uint64_t* out = allowed->data();
  auto set = [out](int32_t t) { out[t >> 6] |= uint64_t{1} << (t & 63); };
  if (can_end())
    for (int32_t id : v.eog_ids()) set(id);
  const std::vector<GrammarVocab::TrieNode>& trie = v.trie();
  const int32_t* toks = v.trie_tokens().data();
  walk_.resize(v.max_len() + 1);
  walk_[0] = cur_;
  const size_t n = trie.size();
  for (size_t i = 0; i < n;) {
    const GrammarVocab::TrieNode& node = trie[i];
    const int32_t s = dfa_.next(walk_[node.depth], node.byte);
    if (s < 0) {
      i = node.end;  // no token under this prefix continues the grammar
      continue;
    }
    walk_[node.depth + 1u] = s;
    for (uint32_t k = node.tok_begin; k < node.tok_end; ++k) set(toks[k]);
    ++i;
  }
  for (int32_t t : tokens_)
    if (dfa_.next_token(cur_, t) >= 0) set(t);
}

std::span<const uint64_t> GrammarConstraint::mask_bits() {
  const std::vector<uint64_t>* mask = mask_of(cur_);
  if (mask == nullptr) {
    const size_t bytes = 8 * ((static_cast<size_t>(vocab_->n_vocab()) + 63) / 64);
    if ((masks_.size() + 1) * std::max<size_t>(bytes, 1) > kMaskCacheBytes) masks_.clear();
    std::vector<uint64_t> m;
    allowed_bits(&m);
    mask = &(masks_[cur_] = std::move(m));
  }
  return *mask;
}

void GrammarConstraint::filter(Candidates* c) {
  const std::span<const uint64_t> m = mask_bits();
  const int32_t n = vocab_->n_vocab();
  std::erase_if(c->data, [&](const Candidate& cd) { return cd.id >= n || !mask_allows(m, cd.id); });
}

void GrammarConstraint::accept(int32_t token) {
  if (token < 0 || token >= vocab_->n_vocab()) return;
  int32_t next = token_step(token);  // a token the grammar names: that element, else its text
  if (next < 0 && !vocab_->is_eog(token)) next = dfa_.walk(cur_, vocab_->piece(token));
  if (next < 0) return;  // not allowed (or the end): the state stays as it was
  cur_ = next;
  if (dfa_.size() > kMaxStates) {  // a long request: start the cache again from here
    const GrammarState s = dfa_.state(cur_);
    dfa_.clear();
    masks_.clear();
    cur_ = dfa_.intern(s);
  }
}

}  // namespace strata
