// The generation loop against a fake model: a session whose logits make token (pos+1) % 8 the
// argmax, and a byte tokenizer. Checks prefill/decode accounting, stopping rules and streaming.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/generate.h"

namespace strata {
namespace {

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
    return special ? "<s" + std::to_string(id) + ">" : "";
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
  int32_t find_token(std::string_view) const override { return -1; }
  int32_t bos_ = -1;

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

GenerateOptions greedy(int n) {
  GenerateOptions o;
  o.n_predict = n;
  o.sampling.temp = 0;
  return o;
}

TEST(Generate, GreedyStreamsScriptedText) {
  ByteTokenizer tok;
  ScriptSession sess(64, {'a', 'b', 'c', 'd'});
  std::string out;
  auto st = generate(sess, tok, kVocab, "xy", greedy(5), [&](std::string_view t) {
    out += t;
    return true;
  });
  ASSERT_TRUE(st.ok()) << st.message();
  // after the prompt (2 tokens) n_past = 2 -> 'c', then 3 -> 'd', 4 -> 'a', ...
  EXPECT_EQ(out, "cdabc");
  EXPECT_EQ(st->n_prompt, 2);
  EXPECT_EQ(st->n_gen, 5);
  EXPECT_EQ(st->n_decode, 4);  // the last sampled token is not evaluated
  EXPECT_EQ(sess.evals, 5);
  EXPECT_EQ(st->stop, StopReason::n_predict);
}

TEST(Generate, AddsBosWhenVocabSaysSo) {
  ByteTokenizer tok;
  tok.bos_ = 257;
  ScriptSession sess(64, {'a'});
  auto st = generate(sess, tok, kVocab, "q", greedy(1), nullptr);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->prompt_tokens.size(), 2u);
  EXPECT_EQ(st->prompt_tokens[0], 257);
}

TEST(Generate, StopsAtEndOfGeneration) {
  ByteTokenizer tok;
  ScriptSession sess(64, {'a', 'b', 259, 'c'});
  std::string out;
  auto st = generate(sess, tok, kVocab, "z", greedy(10), [&](std::string_view t) {
    out += t;
    return true;
  });
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(out, "b");
  EXPECT_EQ(st->stop, StopReason::eog);
  auto o = greedy(4);
  o.ignore_eos = true;
  ScriptSession sess2(64, {'a', 'b', 259, 'c'});
  st = generate(sess2, tok, kVocab, "z", o, nullptr);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->n_gen, 4);
}

TEST(Generate, StopsWhenContextIsFull) {
  ByteTokenizer tok;
  ScriptSession sess(6, {'a', 'b'});
  auto st = generate(sess, tok, kVocab, "abc", greedy(100), nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(st->stop, StopReason::ctx_full);
  EXPECT_EQ(sess.n_past(), 6);
  EXPECT_EQ(st->n_gen, 4);  // 3 positions left after the prompt, plus the one from the last eval
}

TEST(Generate, PromptLongerThanContextIsAnError) {
  ByteTokenizer tok;
  ScriptSession sess(4, {'a'});
  auto st = generate(sess, tok, kVocab, "abcdef", greedy(1), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("prompt is 6 tokens"), std::string::npos) << st.message();
  EXPECT_EQ(sess.evals, 0);
}

TEST(Generate, EmptyPromptIsAnError) {
  ByteTokenizer tok;
  ScriptSession sess(4, {'a'});
  auto st = generate(sess, tok, kVocab, "", greedy(1), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("empty"), std::string::npos);
}

TEST(Generate, Utf8SplitAcrossTokensIsHeldBack) {
  ByteTokenizer tok;
  // the euro sign's 3 bytes come as 3 tokens: the callback must see it whole
  ScriptSession sess(64, {0xE2, 'x', 0xE2, 0x82, 0xAC});
  std::vector<std::string> pieces;
  auto st = generate(sess, tok, kVocab, "x", greedy(4), [&](std::string_view t) {
    pieces.emplace_back(t);
    return true;
  });
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0], "x");
  EXPECT_EQ(pieces[1], "\xE2\x82\xAC");
}

TEST(Generate, CallbackCanStop) {
  ByteTokenizer tok;
  ScriptSession sess(64, {'a', 'b'});
  int calls = 0;
  auto st = generate(sess, tok, kVocab, "x", greedy(50), [&](std::string_view) { return ++calls < 3; });
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->stop, StopReason::callback);
  EXPECT_EQ(st->n_gen, 3);
}

}  // namespace
}  // namespace strata
