// Fakes for runtime tests: a byte tokenizer (256 bytes + 4 specials; 259 = end of generation; the
// specials' text is "<sN>", or names[N - 256] where names are given, as find_token finds them) and a
// session whose logits make a scripted token the argmax at each position.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/model.h"
#include "text/tokenizer.h"

namespace strata::testing_fakes {

constexpr int32_t kVocab = 260;  // 256 bytes + 4 specials; 259 = eos

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool) const override {
    std::vector<int32_t> v;
    if (add_special && bos_ >= 0) v.push_back(bos_);
    for (unsigned char c : text) v.push_back(c);
    return v;
  }
  std::string token_to_piece(int32_t id, bool special) const override {
    if (id < 256) return std::string(1, static_cast<char>(id));
    if (!special || id < 256 || id >= kVocab) return "";
    return static_cast<size_t>(id - 256) < names.size() ? names[static_cast<size_t>(id - 256)]
                                                        : "<s" + std::to_string(id) + ">";
  }
  int32_t n_vocab() const override { return kVocab; }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return 259; }
  bool add_bos() const override { return bos_ >= 0; }
  bool is_eog(int32_t id) const override { return id == 259; }
  const std::string& model_name() const override { return name_; }
  const std::string& pre_name() const override { return name_; }
  bool add_eos() const override { return false; }
  int32_t eot_id() const override { return -1; }
  int32_t eom_id() const override { return -1; }
  int32_t unk_id() const override { return -1; }
  int32_t pad_id() const override { return -1; }
  bool add_space_prefix() const override { return false; }
  bool is_control(int32_t id) const override { return id >= 256; }
  text::TokenType token_type(int32_t id) const override {
    return id >= 256 ? text::TokenType::control : text::TokenType::normal;
  }
  const std::string& token_text(int32_t) const override { return name_; }
  int32_t find_token(std::string_view text) const override {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == text) return 256 + static_cast<int32_t>(i);
    return -1;
  }
  int32_t bos_ = -1;
  std::vector<std::string> names;  // the specials' text (a tool-call marker as one control token)

 private:
  std::string name_ = "bytes";
};

// Logits: the token scripted for the position after the last evaluated one gets 10, others 0.
class ScriptSession : public Session {
 public:
  ScriptSession(int n_ctx, std::vector<int32_t> script) : n_ctx_(n_ctx), script_(std::move(script)) {}
  Status eval(std::span<const int32_t> tokens, float* logits, bool all_logits) override {
    if (n_past_ + static_cast<int>(tokens.size()) > n_ctx_) return err("context full");
    EXPECT_FALSE(all_logits);
    n_past_ += static_cast<int>(tokens.size());
    seen.insert(seen.end(), tokens.begin(), tokens.end());
    evals++;
    for (int i = 0; i < kVocab; ++i) logits[i] = 0;
    const size_t k = static_cast<size_t>(n_past_) % script_.size();
    logits[script_[k]] = 10.0f;
    return {};
  }
  int n_past() const override { return n_past_; }
  int n_ctx() const override { return n_ctx_; }
  void reset() override { n_past_ = 0; }
  std::vector<int32_t> seen;
  int evals = 0;

 private:
  int n_ctx_;
  int n_past_ = 0;
  std::vector<int32_t> script_;
};

// A BatchRunner over sessions that evaluate themselves (test doubles): each sequence's run of the
// batch is one eval of that session; wanted rows must be the run's last token. Records every
// call's size and sequence count.
class EvalRunner : public BatchRunner {
 public:
  Status forward(std::span<Session* const> sessions, const TokenBatch& b, float* logits) const override {
    calls.push_back({b.tokens.size(), 0});
    std::vector<float> discard(kVocab);
    size_t out = 0;
    for (size_t t0 = 0; t0 < b.tokens.size();) {
      const int32_t sq = b.seq.empty() ? 0 : b.seq[t0];
      size_t t1 = t0;
      while (t1 < b.tokens.size() && (b.seq.empty() ? 0 : b.seq[t1]) == sq) ++t1;
      const bool want = b.logits.empty() || b.logits[t1 - 1] != 0;
      for (size_t t = t0; t + 1 < t1; ++t)
        if (!b.logits.empty() && b.logits[t]) return err("EvalRunner: logits of a run's inner token");
      float* dst = want ? logits + out * kVocab : discard.data();
      STRATA_TRY(sessions[static_cast<size_t>(sq)]->eval(b.tokens.subspan(t0, t1 - t0), dst, false));
      out += want ? 1 : 0;
      ++calls.back().second;
      t0 = t1;
    }
    return {};
  }
  mutable std::vector<std::pair<size_t, size_t>> calls;  // (tokens, sequences) per forward
};

}  // namespace strata::testing_fakes
