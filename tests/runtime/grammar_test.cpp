// GBNF grammars: parsing (valid grammars, errors naming line and column), matching whole strings,
// incremental matching across UTF-8 boundaries, the vocabulary mask against per-token checks, and
// `<[id]>` token elements (a control token the grammar forces, never matched by text).
#include "runtime/grammar.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <span>

#include "runtime/fake_session.h"
#include "runtime/grammar_constraint.h"
#include "runtime/grammar_matcher.h"
#include "runtime/sampler.h"

namespace strata {
namespace {

Grammar must_parse(const std::string& text) {
  auto g = Grammar::parse(text);
  EXPECT_TRUE(g.ok()) << g.message() << "\n" << text;
  return g.ok() ? std::move(*g) : Grammar();
}

std::string parse_error(const std::string& text) {
  auto g = Grammar::parse(text);
  EXPECT_FALSE(g.ok()) << text;
  return g.ok() ? "" : g.message();
}

TEST(Grammar, ParsesLlamaCppSyntax) {
  const Grammar g = must_parse(R"(
# a comment
root   ::= "{" ws pair ("," ws pair)* "}"   # trailing comment
pair   ::= [a-z_]+ ":" ws ("yes" | "no" | num)
num    ::= "-"? [0-9]{1,3} ("." [0-9]+)?
ws     ::= [ \t\n]{0,2}
)");
  EXPECT_TRUE(grammar_matches(g, "{a: yes}"));
  EXPECT_TRUE(grammar_matches(g, "{a:no,\n b_c:  -12.50}"));
  EXPECT_FALSE(grammar_matches(g, "{a: yes"));     // not finished
  EXPECT_FALSE(grammar_matches(g, "{a: maybe}"));  // no alternative
  EXPECT_FALSE(grammar_matches(g, "{a: 1234}"));   // {1,3}
  EXPECT_FALSE(grammar_matches(g, "{a:   yes}"));  // {0,2} spaces
  EXPECT_FALSE(grammar_matches(g, "{A: yes}"));    // class
  EXPECT_FALSE(grammar_matches(g, "{a: yes}, "));  // trailing text
}

TEST(Grammar, RepetitionsClassesEscapesAndAnyChar) {
  const Grammar g = must_parse(
      "root ::= a b c d e\n"
      "a ::= \"x\"{2}\n"
      "b ::= \"y\"{1,}\n"
      "c ::= [^\\n\\x41-\\x43]*\n"
      "d ::= \"\\u00e9\\\"\" .\n"
      "e ::= (\"ab\")? \"!\"");
  EXPECT_TRUE(grammar_matches(g, "xxyy zz\xC3\xA9\"Q!"));
  EXPECT_TRUE(grammar_matches(g,
                              "xxy\xC3\xA9\"\xE2\x82\xAC"
                              "ab!"));                      // . is any code point
  EXPECT_FALSE(grammar_matches(g, "xyy\xC3\xA9\"Q!"));      // {2}
  EXPECT_FALSE(grammar_matches(g, "xxyB\xC3\xA9\"Q!"));     // negated range
  EXPECT_FALSE(grammar_matches(g, "xxy\xC3\xA9\"Qabab!"));  // ? once
  EXPECT_TRUE(grammar_matches(must_parse("root ::= [a-c]{0,3}"), ""));
  EXPECT_FALSE(grammar_matches(must_parse("root ::= [a-c]{0,3}"), "abca"));
  EXPECT_TRUE(grammar_matches(must_parse("root ::= \"a\" | \"\""), ""));
}

TEST(Grammar, ErrorsNameLineAndColumn) {
  EXPECT_EQ(parse_error("root ::= \"a\"\nx ::= [a-"), "grammar 2:7: unterminated character class");
  EXPECT_EQ(parse_error("root ::= foo"), "grammar 1:10: rule 'foo' is not defined");
  EXPECT_EQ(parse_error("rot ::= \"a\""), "grammar: there is no 'root' rule");
  EXPECT_EQ(parse_error("root ::= \"a\n"), "grammar 1:10: unterminated string literal");
  EXPECT_EQ(parse_error("root ::= ( \"a\""), "grammar 1:15: expected ')'");
  EXPECT_EQ(parse_error("root ::= * \"a\""), "grammar 1:10: '*' follows nothing it could repeat");
  EXPECT_EQ(parse_error("root ::= \"a\"{3,1}"), "grammar 1:18: repetition {m,n} has n < m");
  EXPECT_EQ(parse_error("root ::= \"\\q\""), "grammar 1:11: unknown escape '\\q'");
  EXPECT_EQ(parse_error("root ::= [z-a]"), "grammar 1:14: character range is reversed");
  EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\""), "grammar 2:1: rule 'root' is defined twice");
  EXPECT_EQ(parse_error("root ::= root \"a\" | \"b\""), "grammar: rule 'root' is left-recursive");
  EXPECT_EQ(parse_error("root ::= x \"a\"\nx ::= y?\ny ::= root"), "grammar: rule 'root' is left-recursive");
  EXPECT_EQ(parse_error("root ::= \"a\" @"), "grammar 1:14: unexpected '@'");
  EXPECT_EQ(parse_error("root ::= \"" + std::string(200, 'a') + "\"{9000}"),
            "grammar 1:218: repetition makes the grammar too large (over 1048576 elements)");
  EXPECT_EQ(parse_error("root = \"a\""), "grammar 1:6: expected '::=' after rule name 'root'");
}

TEST(Grammar, MatcherHoldsUnfinishedUtf8AndRejectsWithoutChangingState) {
  auto g = std::make_shared<Grammar>(must_parse("root ::= \"\xC3\xA9\" [a-z]+"));
  GrammarMatcher m(g);
  EXPECT_FALSE(m.accept("\xC3\xA8"));  // è: the second byte decides
  EXPECT_TRUE(m.accept("\xC3"));       // half of é
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept("\xC3"));  // not a continuation byte
  EXPECT_TRUE(
      m.accept("\xA9"
               "ab"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.complete());
  EXPECT_FALSE(m.accept("aB"));  // rejected as a whole: "a" is not kept
  EXPECT_TRUE(m.accept("c"));
  EXPECT_FALSE(m.can_accept("\x80"));
  EXPECT_FALSE(m.can_accept("\xC1\xA1"));                                   // 'a' overlong in two bytes
  EXPECT_FALSE(m.can_accept("\xF0\x80\x81\xA1"));                           // and in four
  EXPECT_FALSE(m.can_accept("\xE0\x81"));                                   // already overlong after two
  EXPECT_FALSE(grammar_matches(must_parse("root ::= ."), "\xED\xA0\x80"));  // a surrogate
  EXPECT_TRUE(grammar_matches(must_parse("root ::= ."), "\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(grammar_matches(must_parse("root ::= ."), "\xF4\x90\x80\x80"));  // beyond U+10FFFF

  auto lit = std::make_shared<Grammar>(must_parse("root ::= \"ok\""));
  GrammarMatcher done(lit);
  EXPECT_TRUE(done.accept("ok"));
  EXPECT_TRUE(done.complete());
  EXPECT_FALSE(done.can_accept(" "));
}

// The one-walk vocabulary mask equals checking every token alone, in every state of a sentence.
TEST(Grammar, VocabularyMaskEqualsPerTokenChecks) {
  testing_fakes::ByteTokenizer bytes;
  auto vocab = std::make_shared<GrammarVocab>(bytes);
  auto g =
      std::make_shared<Grammar>(must_parse("root ::= \"[\" ([0-9]+ (\",\" [0-9]+)*)? \"]\" \"\xC3\xA9\"?"));
  GrammarConstraint c(g, vocab);
  const std::string sentence = "[12,3]\xC3\xA9";
  for (size_t i = 0; i <= sentence.size(); ++i) {
    std::vector<uint8_t> mask;
    c.allowed_tokens(&mask);
    for (int32_t id = 0; id < vocab->n_vocab(); ++id)
      EXPECT_EQ(mask[id] != 0, c.allows(id)) << i << " " << id;
    Candidates all;  // filter() caches the state's mask; allows() then reads it
    std::vector<float> zeros(testing_fakes::kVocab, 0.0f);
    candidates_from_logits(zeros.data(), testing_fakes::kVocab, &all);
    c.filter(&all);
    EXPECT_TRUE(c.mask_ready());
    size_t n_allowed = 0;
    for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
      EXPECT_EQ(mask[id] != 0, c.allows(id)) << i << " " << id;
      n_allowed += mask[id];
    }
    EXPECT_EQ(all.data.size(), n_allowed);
    EXPECT_EQ(c.allows(259), i == 6 || i == sentence.size()) << i;  // end of generation
    if (i < sentence.size()) {
      ASSERT_TRUE(c.allows(static_cast<uint8_t>(sentence[i])));
      c.accept(static_cast<uint8_t>(sentence[i]));
    }
  }
  EXPECT_TRUE(c.complete());
  Candidates cands;
  std::vector<float> logits(testing_fakes::kVocab, 0.0f);
  candidates_from_logits(logits.data(), testing_fakes::kVocab, &cands);
  c.filter(&cands);
  ASSERT_EQ(cands.data.size(), 1u);
  EXPECT_EQ(cands.data[0].id, 259);
}

// Parity on a vocabulary of multi-byte tokens (shared prefixes, identical pieces, tokens ending
// inside a UTF-8 character): in every state of random walks through several grammars, the trie
// walk's mask and the automaton's check of one token both equal the matcher's per-token check.
std::vector<std::string> random_pieces(std::mt19937& rng) {
  const std::vector<std::string> frags = {
      "{", "}", "\"",   ":",  ",",  " ",  "[", "]", "a",    "b",    "ab", "1",  "12", "0",        "-",
      ".", "e", "true", "nu", "ll", "\\", "n", "u", "\xC3", "\xA9", "é",  "中", "\n", "\xE4\xB8", "\xAD"};
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  for (int i = 0; i < 3000; ++i) {
    std::string p;
    for (size_t n = 1 + rng() % 4; n-- > 0;) p += frags[rng() % frags.size()];
    pieces.push_back(p);
  }
  pieces.push_back("");  // a control token
  pieces.push_back("");  // end of generation
  return pieces;
}

const char* const kJsonObjectGrammar =
    R"(root ::= "{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}"
value ::= string | num | "true" | "null" | "[" ws (value ws ("," ws value ws)*)? "]"
string ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\nu])* "\""
num ::= "-"? ("0" | [1-9] [0-9]{0,3}) ("." [0-9]+)?
ws ::= " "?)";

TEST(Grammar, TrieMaskEqualsMatcherOnManyGrammarsAndStates) {
  std::mt19937 rng(42);
  const std::vector<std::string> pieces = random_pieces(rng);
  const int32_t eog = static_cast<int32_t>(pieces.size()) - 1;
  auto vocab = std::make_shared<GrammarVocab>(pieces, std::vector<int32_t>{eog});
  const std::vector<std::string> grammars = {
      kJsonObjectGrammar,
      "root ::= ([a-b] | \"\xC3\xA9\" | [\xE4\xB8\x80-\xE4\xB8\xAD])+ (\",\" root)?",
      "root ::= [^\\x00-\\x2f]{1,6} \"\\n\" | \"ab\"* \"1\"{2,3}",
      "root ::= (\"true\" | \"null\" | \"n\" \"u\"+) (\" \" root)?",
  };
  for (size_t gi = 0; gi < grammars.size(); ++gi) {
    auto g = std::make_shared<Grammar>(must_parse(grammars[gi]));
    for (int run = 0; run < 4; ++run) {
      GrammarConstraint c(g, vocab);
      GrammarMatcher ref(g);
      for (int step = 0; step < 24; ++step) {
        std::vector<uint8_t> mask;
        c.allowed_tokens(&mask);
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
          const bool want = id == eog ? ref.can_end() : !pieces[id].empty() && ref.can_accept(pieces[id]);
          ASSERT_EQ(mask[id] != 0, want) << gi << " " << run << " " << step << " " << id;
          ASSERT_EQ(c.allows(id), want) << gi << " " << run << " " << step << " " << id;
          if (want && id != eog) allowed.push_back(id);
        }
        EXPECT_EQ(c.can_end(), ref.can_end());
        const std::span<const uint64_t> bits = c.mask_bits();  // the sampler's form, cached
        ASSERT_EQ(bits.size(), (mask.size() + 63) / 64);
        for (size_t id = 0; id < mask.size(); ++id)
          ASSERT_EQ((bits[id / 64] >> (id % 64)) & 1, mask[id]) << gi << " " << step << " " << id;
        if (allowed.empty()) break;
        const int32_t tok = allowed[rng() % allowed.size()];
        c.accept(tok);
        ASSERT_TRUE(ref.accept(pieces[tok]));
      }
    }
  }
}

// A constraint that gives the sampler no mask bits: it filters the sampler's whole list with the
// per-token check (caching the state's mask when the grammar's constraint would, so both sample
// along the same path), for the sampler's parity test.
class CheckOnly : public TokenConstraint {
 public:
  explicit CheckOnly(std::unique_ptr<GrammarConstraint> c) : c_(std::move(c)) {}
  bool allows(int32_t t) override { return c_->allows(t); }
  void filter(Candidates* c) override {
    std::vector<bool> ok;
    for (const Candidate& cd : c->data) ok.push_back(c_->allows(cd.id));  // before any mask
    Candidates none;
    c_->filter(&none);
    size_t i = 0;
    std::erase_if(c->data, [&](const Candidate&) { return !ok[i++]; });
  }
  bool mask_ready() override { return c_->mask_ready(); }
  void accept(int32_t t) override { c_->accept(t); }
  bool can_end() const override { return c_->can_end(); }
  bool complete() const override { return c_->complete(); }

 private:
  std::unique_ptr<GrammarConstraint> c_;
};

// The sampler under a grammar draws from the allowed tokens built from the mask's bits (and tries the
// best few one by one when greedy): every draw equals the one from the whole list filtered token by
// token, greedy and sampled, with and without bias and penalties, over random logits.
TEST(Grammar, SamplingFromTheMaskEqualsFilteringEveryToken) {
  std::mt19937 rng(7);
  std::vector<std::string> pieces = random_pieces(rng);
  const int32_t eog = static_cast<int32_t>(pieces.size()) - 1;
  auto vocab = std::make_shared<GrammarVocab>(pieces, std::vector<int32_t>{eog});
  auto g = std::make_shared<Grammar>(must_parse(kJsonObjectGrammar));
  const int32_t n_vocab = vocab->n_vocab() + 5;  // a model's padded rows: never allowed
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  for (int variant = 0; variant < 6; ++variant) {  // greedy / sampled x plain, penalties, bias too
    SamplerParams p;
    p.temp = variant % 2 == 0 ? 0.0f : 0.8f;
    p.seed = 11 + static_cast<uint32_t>(variant);
    if (variant >= 2) {
      p.presence_penalty = 0.5f;
      p.repeat_penalty = 1.3f;
    }
    if (variant >= 4) p.logit_bias = {{'{', 2.0f}, {'"', -1.0f}};
    Sampler masked(p, n_vocab), checked(p, n_vocab);
    masked.set_constraint(std::make_unique<GrammarConstraint>(g, vocab));
    checked.set_constraint(std::make_unique<CheckOnly>(std::make_unique<GrammarConstraint>(g, vocab)));
    for (int step = 0; step < 100; ++step) {
      for (float& x : logits) x = normal(rng);
      if (step % 3 == 0) logits[static_cast<size_t>(eog)] += 4.0f;  // an end now and then
      const int32_t a = masked.sample(logits.data()), b = checked.sample(logits.data());
      ASSERT_EQ(a, b) << variant << " " << step;
      if (a < 0 || a == eog || masked.constraint()->complete()) {  // the next request
        masked.set_constraint(std::make_unique<GrammarConstraint>(g, vocab));
        checked.set_constraint(std::make_unique<CheckOnly>(std::make_unique<GrammarConstraint>(g, vocab)));
        continue;
      }
      masked.accept(a);
      checked.accept(b);
    }
  }
}

// A request longer than the automaton's state budget: the automaton and the masks start again from
// the current state, and the constraint goes on as before.
TEST(Grammar, ConstraintStartsItsCacheAgainPastTheStateBudget) {
  testing_fakes::ByteTokenizer bytes;
  auto vocab = std::make_shared<GrammarVocab>(bytes);
  const size_t n = GrammarConstraint::kMaxStates + 100;
  auto g = std::make_shared<Grammar>(must_parse("root ::= \"a\"{" + std::to_string(n) + "} \"b\""));
  GrammarConstraint c(g, vocab);
  for (size_t i = 0; i < n; ++i) {
    if (i % 1000 == 999) {  // a mask now and then, cached across the reset
      std::vector<uint8_t> mask;
      c.allowed_tokens(&mask);
      ASSERT_EQ(std::count(mask.begin(), mask.end(), 1), 1);
      ASSERT_EQ(mask['a'], 1);
    }
    ASSERT_TRUE(c.allows('a')) << i;
    ASSERT_FALSE(c.allows('b')) << i;
    c.accept('a');
  }
  EXPECT_FALSE(c.allows('a'));
  EXPECT_TRUE(c.allows('b'));
  c.accept('b');
  EXPECT_TRUE(c.complete());
  EXPECT_TRUE(c.allows(259));
}

// `<[id]>` is that one token: not its text, not `.` or a negated class; the constraint allows the
// control token (an end-of-generation one too, where the grammar names it before it could end).
TEST(Grammar, TokenElementsAreOneTokenNeverText) {
  auto g = std::make_shared<Grammar>(must_parse(R"(root ::= <[256]> "[" [^\]]* "]" | "x" . | "e" <[259]>)"));
  EXPECT_EQ(g->tokens(), (std::vector<int32_t>{256, 259}));
  EXPECT_FALSE(grammar_matches(*g, "<[256]>[]"));
  GrammarMatcher m(g);
  EXPECT_FALSE(m.accept("["));
  EXPECT_TRUE(m.accept_token(256));
  EXPECT_FALSE(m.accept_token(256));  // [^\]] is text only
  EXPECT_TRUE(m.accept("[ab]"));
  EXPECT_TRUE(m.can_end());
  GrammarMatcher any(g);
  ASSERT_TRUE(any.accept("x"));
  EXPECT_FALSE(any.accept_token(256));  // nor is .
  EXPECT_FALSE(any.accept_token(257));

  testing_fakes::ByteTokenizer bytes;
  bytes.names = {"[TOOL_CALLS]"};
  auto vocab = std::make_shared<GrammarVocab>(bytes);
  EXPECT_EQ(vocab->shown_text(256), "[TOOL_CALLS]");
  EXPECT_FALSE(vocab->has_text(256));
  GrammarConstraint c(g, vocab);
  std::vector<uint8_t> mask;
  c.allowed_tokens(&mask);
  EXPECT_EQ(std::count(mask.begin(), mask.end(), 1), 3);
  EXPECT_TRUE(mask[256] && mask['x'] && mask['e']);
  EXPECT_TRUE(c.allows(256));
  EXPECT_FALSE(c.allows('['));
  c.accept(256);
  EXPECT_FALSE(c.allows(256));
  EXPECT_TRUE(c.allows('['));
  GrammarConstraint end(g, vocab);
  EXPECT_FALSE(end.allows(259));
  end.accept('e');
  EXPECT_FALSE(end.can_end());
  EXPECT_TRUE(end.allows(259));  // named: allowed before the grammar could end
  c.allowed_tokens(&mask);
  EXPECT_EQ(mask[259], 0);

  EXPECT_NE(parse_error("root ::= <[12 \"a\"").find("grammar 1:14: expected ']>' after token id 12"),
            std::string::npos);
  EXPECT_NE(parse_error("root ::= <[]>").find("expected a token id"), std::string::npos);
  EXPECT_NE(parse_error("root ::= <[99999999999]>").find("token id is over"), std::string::npos);
}

}  // namespace
}  // namespace strata
