// A lazy grammar constraint (llama.cpp's grammar triggers): the text is free until a trigger string
// appears in it, and from the trigger on (the trigger included) it must match the grammar. OpenAI tool
// calls with tool_choice "auto": the model may answer in prose, and once it opens a call
// ("<tool_call>") only a well-formed call of the given tools can follow.
//
// Before the trigger every token is allowed except one that completes the trigger with text the
// grammar rejects; end of generation is allowed. The token that completes the trigger starts a
// GrammarConstraint (runtime/grammar_constraint.h) and feeds it the text from the trigger on, spelled
// as the vocabulary's longest pieces; from then on that constraint decides. A control token the
// grammar names (`<[id]>`: a marker such as [TOOL_CALLS] that the model emits as one token) counts
// as its text in the trigger, and that text is spelled as the token: "[TOOL_CALLS]" triggers on the
// token (and on the marker spelled as plain text, which the grammar then takes as the token).
//
//   sampler.set_constraint(std::make_unique<LazyGrammarConstraint>(grammar, vocab, "<tool_call>"));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/grammar_constraint.h"

namespace strata {

class LazyGrammarConstraint : public TokenConstraint {
 public:
  LazyGrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const GrammarVocab> vocab,
                        std::string trigger);

  bool allows(int32_t token) override;
  void filter(Candidates* c) override;
  bool mask_ready() override { return inner_ && inner_->mask_ready(); }
  std::span<const uint64_t> mask_bits() override {
    return inner_ ? inner_->mask_bits() : std::span<const uint64_t>();
  }
  void accept(int32_t token) override;
  bool can_end() const override { return !inner_ || inner_->can_end(); }
  bool complete() const override { return inner_ && inner_->complete(); }
  bool active() const { return inner_ != nullptr; }  // the trigger appeared

 private:
  // `text` from the trigger on, as vocabulary tokens (the grammar's control tokens where their text
  // is); empty when the grammar rejects it or no piece spells some byte of it.
  std::vector<int32_t> spell(std::string_view text) const;
  // The token's text as the trigger sees it: its piece, or a control token's text when the grammar
  // names it.
  const std::string& text_of(int32_t token) const;
  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const GrammarVocab> vocab_;
  std::string trigger_;
  GrammarMatcher start_;
  std::string tail_;  // the free text's last trigger_.size() - 1 bytes
  std::unique_ptr<GrammarConstraint> inner_;
};

}  // namespace strata
