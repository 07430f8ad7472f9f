// A grammar as a sampler constraint (runtime/sampler.h TokenConstraint): a token is allowed when
// its text continues the grammar (runtime/grammar_matcher.h), or the grammar names it (`<[id]>`) and
// admits it here; an end-of-generation token also when the grammar can end there; other control
// tokens and tokens without text never.
//
// GrammarVocab holds what every request's constraint shares: each token's text, and a byte trie
// of the tokens (nodes in depth-first order, each knowing where its subtree ends), so that masking
// the whole vocabulary matches a prefix once for all the tokens that start with it and skips the
// subtree of a prefix the grammar rejects. The constraint walks the matcher's states through a
// GrammarDfa (runtime/grammar_dfa.h): each (state, byte) step is computed once per request and then
// looked up, so a mask is one pass of table loads over the trie and checking a drawn token is a
// few loads. Masks are kept per state (up to kMaskCacheBytes): in a JSON string or a run of digits
// the state repeats, and both the check of a drawn token and the mask become a lookup.
//
//   auto vocab = std::make_shared<GrammarVocab>(tok);      // once per tokenizer
//   sampler.set_constraint(std::make_unique<GrammarConstraint>(grammar, vocab));
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/grammar_dfa.h"
#include "runtime/sampler.h"
#include "text/tokenizer.h"

namespace strata {

class GrammarVocab {
 public:
  explicit GrammarVocab(const Tokenizer& tok);
  // pieces[id]: the token's text ("" for control tokens and tokens without text); eog: the
  // end-of-generation ids (benchmarks, tests).
  // control: control tokens' text (what they show with special pieces; their pieces are "").
  GrammarVocab(std::vector<std::string> pieces, const std::vector<int32_t>& eog,
               std::unordered_map<int32_t, std::string> control = {});

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  bool is_eog(int32_t id) const { return eog_[static_cast<size_t>(id)] != 0; }
  bool has_text(int32_t id) const { return text_[static_cast<size_t>(id)] != 0; }
  size_t max_len() const { return max_len_; }
  // The token's text, a control token's included (what it shows with special pieces; "" for an
  // end-of-generation token).
  const std::string& shown_text(int32_t id) const {
    auto it = control_.find(id);
    return it != control_.end() ? it->second : piece(id);
  }

  // The trie: node i stands for the byte `byte` at depth `depth` (the root's children are depth 0);
  // its subtree is nodes [i, end); the tokens whose text ends there are
  // trie_tokens()[tok_begin, tok_end).
  struct TrieNode {
    uint32_t end;
    uint32_t tok_begin, tok_end;
    uint32_t depth;
    uint8_t byte;
  };
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  // A token whose text is exactly `text` (the lowest such id), -1 if none: one walk down the trie.
  int32_t find(std::string_view text) const;

 private:
  std::vector<std::string> pieces_;
  std::vector<uint8_t> eog_, text_;
  std::vector<int32_t> eog_ids_;
  std::unordered_map<int32_t, std::string> control_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
  size_t max_len_ = 0;
  void build();
};

class GrammarConstraint : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const GrammarVocab> vocab);

  bool allows(int32_t token) override;
  void filter(Candidates* c) override;
  void accept(int32_t token) override;
  bool mask_ready() override { return mask_of(cur_) != nullptr; }
  std::span<const uint64_t> mask_bits() override;
  bool can_end() const override { return grammar_can_end(dfa_.state(cur_)); }
  bool complete() const override { return grammar_complete(dfa_.state(cur_)); }

  // Marks in *allowed (n_vocab entries) every token allowed now: one walk over the vocabulary trie.
  void allowed_tokens(std::vector<uint8_t>* allowed);
  // The same as bits (token t: bit t % 64 of word t / 64; (n_vocab + 63) / 64 words).
  void allowed_bits(std::vector<uint64_t>* allowed);

  static constexpr size_t kMaskCacheBytes = size_t{8} << 20;
  // Beyond this many automaton states (1 KiB of transitions each) the automaton and the masks are
  // forgotten at the next token.
  static constexpr size_t kMaxStates = 8192;

 private:
  std::shared_ptr<const GrammarVocab> vocab_;
  GrammarDfa dfa_;
  int32_t cur_;                                               // the current state
  std::vector<int32_t> walk_;                                 // the walk's state per trie depth (reused)
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;  // state -> allowed tokens (bits)
  std::vector<int32_t> tokens_;                               // the grammar's `<[id]>` tokens in the vocab
  // The state after the grammar's token `token`; GrammarDfa::kReject when it is not one or not here.
  int32_t token_step(int32_t token) {
    return dfa_.grammar().names_token(token) ? dfa_.next_token(cur_, token) : GrammarDfa::kReject;
  }
  const std::vector<uint64_t>* mask_of(int32_t state) const {
    auto it = masks_.find(state);
    return it == masks_.end() ? nullptr : &it->second;
  }
};

}  // namespace strata
