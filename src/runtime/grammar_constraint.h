// A grammar as a sampler constraint (runtime/sampler.h TokenConstraint): a token is allowed when
// its text continues the grammar (runtime/grammar_matcher.h); an end-of-generation token when the
// grammar can end there; other control tokens and tokens without text never.
//
// GrammarVocab holds what every request's constraint shares: each token's text, and the tokens in
// byte order with the length each shares with the one before it, so that masking the whole
// vocabulary walks it like a trie: a prefix is matched once for all the tokens that start with it,
// and a prefix the grammar rejects skips them all. A constraint keeps the masks it computed per
// matcher state (up to kMaskCacheBytes): in a JSON string or a run of digits the state repeats, and
// both the check of a drawn token and the mask become a lookup.
//
//   auto vocab = std::make_shared<GrammarVocab>(tok);      // once per tokenizer
//   sampler.set_constraint(std::make_unique<GrammarConstraint>(grammar, vocab));
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/grammar_matcher.h"
#include "runtime/sampler.h"
#include "text/tokenizer.h"

namespace strata {

class GrammarVocab {
 public:
  explicit GrammarVocab(const Tokenizer& tok);

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  bool is_eog(int32_t id) const { return eog_[static_cast<size_t>(id)] != 0; }
  bool has_text(int32_t id) const { return text_[static_cast<size_t>(id)] != 0; }
  // Tokens with text, sorted by their bytes; lcp[i]: bytes order[i] shares with order[i - 1].
  const std::vector<int32_t>& order() const { return order_; }
  const std::vector<uint32_t>& lcp() const { return lcp_; }
  size_t max_len() const { return max_len_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<uint8_t> eog_, text_;
  std::vector<int32_t> order_;
  std::vector<uint32_t> lcp_;
  size_t max_len_ = 0;
};

class GrammarConstraint : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const GrammarVocab> vocab);

  bool allows(int32_t token) override;
  void filter(Candidates* c) override;
  void accept(int32_t token) override;
  bool mask_ready() override {
    look_up();
    return mask_ != nullptr;
  }
  bool can_end() const override { return matcher_.can_end(); }
  bool complete() const override { return matcher_.complete(); }

  // Marks in *allowed (n_vocab entries) every token allowed now: one walk over the sorted vocabulary.
  void allowed_tokens(std::vector<uint8_t>* allowed);

  static constexpr size_t kMaskCacheBytes = size_t{8} << 20;

 private:
  std::shared_ptr<const GrammarVocab> vocab_;
  GrammarMatcher matcher_;
  std::vector<GrammarState> walk_;  // the walk's state per prefix length (reused)
  std::unordered_map<std::string, std::vector<uint8_t>> masks_;  // matcher state -> allowed tokens
  const std::vector<uint8_t>* mask_ = nullptr;                   // the current state's, if cached
  bool looked_up_ = false;                                       // mask_ is current
  std::string key_;                                              // the current state's key
  void look_up();
};

}  // namespace strata
